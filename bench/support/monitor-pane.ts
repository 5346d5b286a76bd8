// The monitor in a tmux pane of its own, as the screen benchmarks run it: the command is exec'd, so
// the pane's process is the monitor itself and /proc measures it (bench/support/proc-usage.ts).
// bench/tui-resources.ts, tui-process-screen.ts and screens-agents.ts start, read and quit it here.

const tmux = Bun.which("tmux");

function sh(...a: string[]): string {
  return Bun.spawnSync([tmux!, ...a], { stdout: "pipe" }).stdout.toString();
}

/** `command` exec'd in a new detached session of `cols`×`rows` (in `cwd` where given). */
export function monitorPane(command: string, cols: number, rows: number, cwd?: string) {
  if (!tmux) throw new Error("this bench needs tmux (apt install tmux)");
  const session = `gpumem-bench-${process.pid}`;
  sh("kill-session", "-t", session);
  sh("new-session", "-d", "-s", session, "-x", String(cols), "-y", String(rows), ...(cwd ? ["-c", cwd] : []), `exec ${command}`);
  const pane = () => sh("capture-pane", "-p", "-t", session);
  return {
    /** The monitor's pid (the pane's process). */
    pid: Number(sh("list-panes", "-t", session, "-F", "#{pane_pid}").trim()),
    pane,
    keys: (...keys: string[]) => void sh("send-keys", "-t", session, ...keys),
    /** Until the header is drawn, polled every 5 ms for at most 10 s: the milliseconds it took from
     *  `t0` (performance.now() before the start), NaN where it never came. */
    async firstFrame(t0: number): Promise<number> {
      while (performance.now() - t0 < 10_000) {
        if (pane().includes("gpumem-tui")) return performance.now() - t0;
        await Bun.sleep(5);
      }
      return Number.NaN;
    },
    /** What the terminal is sent from now on, appended to `file`; none without one. */
    pipe: (file?: string) => void (file ? sh("pipe-pane", "-o", "-t", session, `cat >> ${file}`) : sh("pipe-pane", "-t", session)),
    /** q, half a second to leave, then the session goes. */
    async quit(): Promise<void> {
      sh("send-keys", "-t", session, "q");
      await Bun.sleep(500);
      sh("kill-session", "-t", session);
    },
  };
}
