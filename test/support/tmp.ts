// Preloaded by `bun test` (bunfig.toml): the tests' temporary folder, named in TMPDIR. os.tmpdir(),
// tmux (TMUX_TMPDIR) and every process a test starts with `env: process.env` (or a copy) read it,
// so a run leaves nothing in /tmp even where a test is killed before its own clean-up. (A process
// started without `env` gets the environment Bun started with in Bun 1.4.4: test/support/spawn-env.ts
// gives it process.env instead.) What the tests left in it is said on stderr (GPUMEM_TEST_TMP_REPORT=1:
// what), so a forgotten folder still shows.
//
// It is removed when the run ends (`bun test`) or the file does (a --parallel worker that runs
// each file in a fresh global, --isolate). A worker that keeps its modules across files
// (`bun run test`: --no-isolate) evaluates this file once, runs its hooks for every file, and
// evaluates each test file before that file's hooks: there the folder stays between files,
// emptied after each (but for what support modules keep in it, keep.ts), and goes with the worker.
import "./spawn-env"; // first: the processes started from here on get process.env
import { afterAll, beforeAll } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { cpuSeconds, reportCpu } from "./cpu";
import { KEEP } from "./keep";

/** Where the run's folder is made: TMPDIR where it is set; else a memory filesystem (/dev/shm) that
 *  runs programs and honours setuid (what the tests build and run from it, the privilege tests' setuid
 *  copies) and has room, since the tests make and remove many files (20,000 directories in one) and
 *  the disk's filesystem costs several times the kernel's time for them here (ext4 mounted with
 *  discard: 1.8 s of system time against 0.11 s for 20,000 mkdirs); else os.tmpdir(). */
function base(): string {
  if (process.env.TMPDIR) return tmpdir();
  try {
    // The last mount at /dev/shm is the one seen: its options and, after " - ", its type.
    const mount = readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.split(" ")[4] === "/dev/shm").at(-1);
    const [before, after] = mount?.split(" - ") ?? [];
    const options = before?.split(" ")[5]?.split(",") ?? [];
    const room = statfsSync("/dev/shm");
    if (after?.startsWith("tmpfs ") && !options.includes("noexec") && !options.includes("nosuid") && room.bavail * room.bsize >= 2 ** 31) return "/dev/shm";
  } catch {
    // no /proc or no /dev/shm: the system's folder
  }
  return tmpdir();
}

// Short: the tests' Unix sockets live under it, and a socket's path has at most 107 bytes.
const run = mkdtempSync(join(base(), "gpumem-t-"));
// As /tmp is: anyone may make an entry, only its owner remove it (tests run programs as other users).
chmodSync(run, 0o1777);
// How this process runs the files (its command line; Bun's own flags are not in process.argv):
// serially, `bun test`, the hooks below run once around the whole run; a worker of `--parallel`
// runs them around each file, and with --isolate evaluates this file afresh for each.
const args = readFileSync("/proc/self/cmdline", "utf8").split("\0");
/** A worker that keeps its modules from file to file (`bun run test`: --parallel --no-isolate). */
const keepsModules = args.includes("--test-worker") && !args.includes("--isolate");
// Such a worker empties the folder after each file and leaves it: this process removes it once its
// stdin closes, i.e. once the worker has ended, however it ended. Held here (its stdin would close
// were it collected) and unref'd (it must not keep the worker alive).
const reaper = keepsModules ? Bun.spawn(["/bin/sh", "-c", 'cat >/dev/null; rm -rf "$0"', run], { stdin: "pipe", stdout: "ignore", stderr: "ignore" }) : null;
reaper?.unref();

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
    left = readdirSync(run).filter((n) => !n.startsWith("tmux-") && !n.startsWith(KEEP));
  } catch {
    return;
  }
  const names = process.env.GPUMEM_TEST_TMP_REPORT ? `: ${left.join(" ")}` : "";
  if (left.length) process.stderr.write(`bun test: the tests left ${left.length} entries in ${run} (now removed)${names}\n`);
  if (keepsModules) for (const name of left) rmSync(join(run, name), { recursive: true, force: true });
  else rmSync(run, { recursive: true, force: true });
});
