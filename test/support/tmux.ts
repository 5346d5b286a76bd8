// A real terminal for tests: a private tmux server (-L, no user config) running a shell line in a
// pane, keys sent to it, and its screen read back. Where tmux cannot open a pane, `cannot` says why
// (the tests then skip visibly), as in test/tui/terminal.test.ts.
import { afterAll, expect } from "bun:test";
import { relative } from "node:path";
import { cpuSeconds, reportCpu } from "./cpu";
import { paneEnv } from "./pane-env";

const tmux = Bun.which("tmux");
const socket = `gpumem-t-${process.pid}`;

function tm(...args: string[]) {
  const r = Bun.spawnSync([tmux!, "-L", socket, "-f", "/dev/null", ...args], { env: paneEnv(), stdout: "pipe", stderr: "pipe" }); // TMUX_TMPDIR: this run's folder
  return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString().trim() };
}

/** Single-quoted for /bin/sh. */
export const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** The keeper's session: while it is there, killing a test's session never ends the private server,
 *  so the next new-session cannot race a server on its way out. Its pane ends with this process
 *  (tail --pid), however that ends, and the server with it. */
function keeper() {
  let r = { ok: false, out: "", err: "" };
  // Tried again: a server killed just before (the afterAll below) can still be on its way out.
  for (let i = 0; i < 3 && !r.ok; i++) {
    if (i) Bun.sleepSync(100);
    r = tm("new-session", "-d", "-s", "keeper", "-x", "40", "-y", "5", "/bin/sh", "-c", `echo tmux-pane-ok; exec tail --pid=${process.pid} -f /dev/null`);
  }
  return r;
}

function probe(): string | null {
  if (!tmux) return "needs tmux: `apt install tmux`";
  const r = keeper();
  if (!r.ok) return `tmux cannot open a pane here: ${r.err || "exit status non-zero"}`;
  for (let i = 0; i < 50; i++) {
    if (tm("capture-pane", "-p", "-t", "keeper").out.includes("tmux-pane-ok")) return null;
    Bun.sleepSync(100);
  }
  return "tmux started a pane but /bin/sh printed nothing in it within 5 s";
}

export const cannot = probe();
/** Whether the server (and its keeper) is up: a worker that keeps its modules across files
 *  (`bun run test`, --no-isolate) evaluates this module once, and its afterAll runs after the first
 *  file that loaded it; the files after that start the server again. */
let up = cannot === null;
afterAll(() => {
  if (!up) return;
  countCpu();
  tm("kill-server");
  up = false;
});

let server = 0;
let counted = 0;
/** The panes' programs are the server's children: their CPU is counted nowhere else. What the
 *  server and the panes it reaped used since the last count, in GPUMEM_TEST_CPU_REPORT (cpu.ts). */
function countCpu() {
  if (!process.env.GPUMEM_TEST_CPU_REPORT) return;
  const pid = Number(tm("display-message", "-p", "#{pid}").out.trim());
  if (!(pid > 0)) return;
  if (pid !== server) [server, counted] = [pid, 0];
  const now = cpuSeconds(pid);
  if (now > counted) reportCpu(`${relative(process.cwd(), Bun.main)} (tmux)`, now - counted, 0);
  counted = now;
}

/** A pane running `line` under /bin/sh, then "exit status N" and a long sleep (the pane stays).
 *  `set -m`: the shell runs the line as a job in a process group of its own, the terminal's
 *  foreground group, as an interactive shell does (Ctrl-C then reaches that job, not the shell). */
export function terminal(name: string, line: string, cols = 120, rows = 40) {
  const session = `${name}-${process.pid}`;
  if (!up) up = keeper().ok;
  tm("kill-session", "-t", session);
  const r = tm("new-session", "-d", "-s", session, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", `set -m; ${line}; echo "exit status $?"; sleep 600`);
  if (!r.ok) throw new Error(`tmux new-session: ${r.err}`);
  const pane = () => tm("capture-pane", "-p", "-t", session).out;
  return {
    pane,
    keys: (...keys: string[]) => tm("send-keys", "-t", session, ...keys),
    close: () => {
      tm("kill-session", "-t", session);
      countCpu();
    },
    /** The screen once it shows `what` (text, a pattern, or a test of the whole screen). Polled
     *  every 100 ms, so the limit costs nothing where the screen comes: it is the headroom of a
     *  loaded machine (the suite runs its files in parallel on two cores), kept under the tests'
     *  30 s (package.json's test script) so that a screen that never comes is shown. */
    async until(what: string | RegExp | ((screen: string) => boolean), timeoutMs = 20_000): Promise<string> {
      const t0 = Date.now();
      for (;;) {
        const text = pane();
        if (typeof what === "string" ? text.includes(what) : typeof what === "function" ? what(text) : what.test(text)) return text;
        if (Date.now() - t0 > timeoutMs) throw new Error(`never saw ${what} in:\n${text}`);
        await Bun.sleep(100);
      }
    },
  };
}

/** `--demo` started in terminal `t`: the Overview is drawn with the demo's banner, and q ends it with
 *  exit status 0 (the shell line prints "exit status N"). */
export async function demoDrawnThenQuit(t: ReturnType<typeof terminal>): Promise<void> {
  const screen = await t.until(/1 Overview|exit status \d+/);
  expect(screen).not.toContain("exit status");
  expect(screen).toContain("demo: a training run recorded on");
  t.keys("q");
  expect(await t.until(/exit status \d+/)).toContain("exit status 0");
}
