// A real terminal for tests: a private tmux server (-L, no user config) running a shell line in a
// pane, keys sent to it, and its screen read back. Where tmux cannot open a pane, `cannot` says why
// (the tests then skip visibly), as in test/tui/terminal.test.ts.
import { afterAll, expect } from "bun:test";
import { relative } from "node:path";
import { cpuSeconds, reportCpu } from "./cpu";

const tmux = Bun.which("tmux");
const socket = `gpumem-t-${process.pid}`;

function tm(...args: string[]) {
  const r = Bun.spawnSync([tmux!, "-L", socket, "-f", "/dev/null", ...args], { env: process.env, stdout: "pipe", stderr: "pipe" }); // TMUX_TMPDIR: this run's folder
  return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString().trim() };
}

/** Single-quoted for /bin/sh. */
export const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

function probe(): string | null {
  if (!tmux) return "needs tmux: `apt install tmux`";
  // The probe's session stays while the file runs, so that the server outlives each test's session.
  const r = tm("new-session", "-d", "-s", "probe", "-x", "40", "-y", "5", "/bin/sh", "-c", "echo tmux-pane-ok; sleep 3600");
  if (!r.ok) return `tmux cannot open a pane here: ${r.err || "exit status non-zero"}`;
  for (let i = 0; i < 50; i++) {
    if (tm("capture-pane", "-p", "-t", "probe").out.includes("tmux-pane-ok")) return null;
    Bun.sleepSync(100);
  }
  return "tmux started a pane but /bin/sh printed nothing in it within 5 s";
}

export const cannot = probe();
const wall0 = performance.now();
afterAll(() => {
  if (cannot !== null) return;
  // The panes' programs are the server's children: their CPU is counted nowhere else.
  const server = Number(tm("display-message", "-p", "#{pid}").out.trim());
  if (server > 0) reportCpu(`${relative(process.cwd(), Bun.main)} (tmux)`, cpuSeconds(server), (performance.now() - wall0) / 1000);
  tm("kill-server");
});

/** A pane running `line` under /bin/sh, then "exit status N" and a long sleep (the pane stays).
 *  `set -m`: the shell runs the line as a job in a process group of its own, the terminal's
 *  foreground group, as an interactive shell does (Ctrl-C then reaches that job, not the shell). */
export function terminal(name: string, line: string, cols = 120, rows = 40) {
  const session = `${name}-${process.pid}`;
  tm("kill-session", "-t", session);
  const r = tm("new-session", "-d", "-s", session, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", `set -m; ${line}; echo "exit status $?"; sleep 600`);
  if (!r.ok) throw new Error(`tmux new-session: ${r.err}`);
  const pane = () => tm("capture-pane", "-p", "-t", session).out;
  return {
    pane,
    keys: (...keys: string[]) => tm("send-keys", "-t", session, ...keys),
    close: () => tm("kill-session", "-t", session),
    /** The screen once it shows `what` (text, a pattern, or a test of the whole screen). Polled
     *  every 100 ms, so the limit costs nothing where the screen comes: it is the headroom of a
     *  loaded machine (the suite runs its files in parallel on two cores). */
    async until(what: string | RegExp | ((screen: string) => boolean), timeoutMs = 30_000): Promise<string> {
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
