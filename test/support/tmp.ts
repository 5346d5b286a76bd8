// Preloaded by `bun test` (bunfig.toml): the tests' temporary folder, named in TMPDIR. os.tmpdir(),
// Python's tempfile, tmux (TMUX_TMPDIR) and every process a test starts read it. What a file left
// in it is said on stderr (GPUMEM_TEST_TMP_REPORT=1: what), so a forgotten folder still shows, and
// removed when the file ends; the folder itself goes when this process does, however it ends (a
// process of its own waits for that), so a run leaves nothing in /tmp even where it is killed.
//
// When the hooks below run: serially (`bun test`), once around the whole run; under `bun run test`
// (--parallel) around each file. A worker that keeps its modules across files (--no-isolate)
// evaluates this file once and runs its hooks for every file, and evaluates each test file before
// that file's hooks: so the folder stays between files, emptied (support modules that keep a
// folder of their own in it make theirs again).
import { afterAll, beforeAll } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { cpuSeconds, reportCpu } from "./cpu";

// Short: the tests' Unix sockets live under it, and a socket's path has at most 107 bytes.
const run = mkdtempSync(join(tmpdir(), "gpumem-t-"));
// As /tmp is: anyone may make an entry, only its owner remove it (tests run programs as other users).
chmodSync(run, 0o1777);
// Removes the folder once its stdin closes, i.e. once this process has ended (unref: it does not
// keep this one alive).
Bun.spawn(["/bin/sh", "-c", 'cat >/dev/null; rm -rf "$0"', run], { stdin: "pipe", stdout: "ignore", stderr: "ignore" }).unref();

function enter() {
  if (!existsSync(run)) {
    // Made only where nothing is: a name someone else took since is refused (mkdir's EEXIST).
    mkdirSync(run, { mode: 0o700 });
    chmodSync(run, 0o1777);
  }
  process.env.TMPDIR = run;
  process.env.TMUX_TMPDIR = run;
}
enter();

let cpu0 = cpuSeconds();
let wall0 = performance.now();
beforeAll(() => {
  enter();
  cpu0 = cpuSeconds();
  wall0 = performance.now();
});

// bun test ends without "exit": the clean-up is a hook.
afterAll(() => {
  // Under --parallel Bun.main is the file; serially, the last one (the figures are the run's).
  reportCpu(relative(process.cwd(), Bun.main), cpuSeconds() - cpu0, (performance.now() - wall0) / 1000);
  let left: string[] = [];
  try {
    left = readdirSync(run).filter((n) => !n.startsWith("tmux-"));
  } catch {
    return;
  }
  const names = process.env.GPUMEM_TEST_TMP_REPORT ? `: ${left.join(" ")}` : "";
  if (left.length) process.stderr.write(`bun test: the tests left ${left.length} entries in ${run} (now removed)${names}\n`);
  for (const name of left) rmSync(join(run, name), { recursive: true, force: true });
});
