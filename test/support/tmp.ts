// Preloaded by `bun test` (bunfig.toml): the run (under --parallel, each file: a worker runs this
// afresh for every file) gets a temporary folder of its own, named in TMPDIR, and removes it when
// the run ends. os.tmpdir(), Python's tempfile, tmux (TMUX_TMPDIR) and every
// process a test starts read it, so a run leaves nothing in /tmp even where a test is killed before
// its own clean-up. How much the tests left there is said on stderr (GPUMEM_TEST_TMP_REPORT=1: what),
// so a forgotten folder still shows.
import { afterAll } from "bun:test";
import { chmodSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { cpuSeconds, reportCpu } from "./cpu";

const cpu0 = cpuSeconds();
const wall0 = performance.now();

const outer = tmpdir();
// Short: the tests' Unix sockets live under it, and a socket's path has at most 107 bytes.
const run = mkdtempSync(join(outer, "gpumem-t-"));
// As /tmp is: anyone may make an entry, only its owner remove it (tests run programs as other users).
chmodSync(run, 0o1777);
process.env.TMPDIR = run;
process.env.TMUX_TMPDIR = run;

// A hook of the whole run (a preload's afterAll), after the last file (under --parallel, after the
// file): bun test ends without "exit".
afterAll(() => {
  // Under --parallel each file runs this preload afresh (and Bun.main is the file); serially once.
  reportCpu(relative(process.cwd(), Bun.main), cpuSeconds() - cpu0, (performance.now() - wall0) / 1000);
  let left: string[] = [];
  try {
    left = readdirSync(run).filter((n) => !n.startsWith("tmux-"));
  } catch {
    return;
  }
  const names = process.env.GPUMEM_TEST_TMP_REPORT ? `: ${left.join(" ")}` : "";
  if (left.length) process.stderr.write(`bun test: the tests left ${left.length} entries in ${run} (now removed)${names}\n`);
  rmSync(run, { recursive: true, force: true });
});
