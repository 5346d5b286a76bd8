// Stopping a process from the monitor (k): a signal to a pid, after checking that the pid is still
// the program the screen showed and that it is the user's own; the result in words.
import { readFileSync } from "node:fs";
import { pidAlive, processInfo } from "./procfs";

export const SIGNALS = ["SIGTERM", "SIGKILL"] as const;
export type StopSignal = (typeof SIGNALS)[number];

export interface SignalResult {
  ok: boolean;
  message: string;
}

export interface SignalOptions {
  /** The command line the screen showed for the pid: a pid now running something else is left alone. */
  command?: string | null;
  /** Whose processes may be signalled: this uid's (root: anyone's). */
  uid?: number;
  procRoot?: string;
}

/** Send `signal` to `pid`, refusing another user's process (unless run as root) or a pid reused by another program. */
export function signalProcess(pid: number, signal: StopSignal, opts: SignalOptions = {}): SignalResult {
  if (!Number.isInteger(pid) || pid <= 1) return { ok: false, message: `pid ${pid} is not a process the monitor stops` };
  if (pid === process.pid) return { ok: false, message: `pid ${pid} is this monitor: q quits it` };
  const info = processInfo(pid, opts.procRoot);
  if (info.uid === null) return { ok: false, message: `pid ${pid} is not running here (it exited, or runs in another pid namespace): nothing sent` };
  const own = opts.uid ?? process.getuid?.() ?? 0;
  if (own !== 0 && info.uid !== own) {
    return { ok: false, message: `pid ${pid} belongs to user ${info.user ?? info.uid}, not to you: only your own processes can be stopped (nothing sent)` };
  }
  if (opts.command && info.command !== null && info.command !== opts.command) {
    return { ok: false, message: `pid ${pid} now runs another program (${info.command.slice(0, 60)}): nothing sent` };
  }
  try {
    process.kill(pid, signal);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ESRCH") return { ok: false, message: `pid ${pid} exited before the ${signal}` };
    if (code === "EPERM") return { ok: false, message: `not permitted to signal pid ${pid} (user ${info.user ?? info.uid}): nothing sent` };
    return { ok: false, message: `${signal} to pid ${pid} failed: ${(e as Error).message}` };
  }
  return { ok: true, message: `${signal} sent to pid ${pid}${info.name ? ` (${info.name})` : ""}` };
}

/** Whether `pid` still runs (a zombie counts as gone: it has stopped and only waits for its parent). */
export function stillRunning(pid: number, procRoot = "/proc"): boolean {
  if (!pidAlive(pid)) return false;
  try {
    const stat = readFileSync(`${procRoot}/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}
