// The program `gpumem-tui run` starts: the agent injected, its exit code passed through, and each
// signal meant for it (Ctrl-C in the terminal, SIGTERM from a scheduler or `kill`) reaching it
// exactly once: a second SIGINT can interrupt the program's own clean-up (the agent's atexit).
import { constants } from "node:os";
import { readFileSync } from "node:fs";
import type { Subprocess } from "bun";
import { launchSpec } from "../launch";

export interface Child {
  proc: Subprocess;
  pid: number;
  exited: Promise<number>;
}

/**
 * Where a signal comes from decides whether the program already has it. The terminal sends Ctrl-C
 * (SIGINT), Ctrl-\ (SIGQUIT) and a hang-up (SIGHUP) to its whole foreground process group; `kill
 * PID` reaches only us. Bun tells a handler nothing of the sender (no siginfo), so the program is
 * placed where the answer is known:
 *
 * - A program that keeps the terminal (`run --json`: it may read stdin, use pdb, be stopped by
 *   Ctrl-Z with its job) stays in our process group, the terminal's foreground one. The terminal's
 *   signals reach it directly, so SIGINT is passed on only when our group is not the foreground one
 *   (then no terminal can have sent it); SIGTERM, which no terminal sends, always. (A SIGINT sent by
 *   `kill` to a gpumem-tui that is the terminal's foreground job is taken for a Ctrl-C: nothing
 *   tells the two apart; SIGTERM is the signal for that.) Making the program the foreground group
 *   instead would need us to act as a shell (Ctrl-Z would stop it alone and leave the terminal to
 *   a stopped process).
 * - A program that does not use the terminal (`run -- CMD`: the monitor has the screen, the program
 *   writes to a log, its stdin is /dev/null) runs in a session of its own, where no terminal signal
 *   reaches it: everything that would end us is passed on, Ctrl-C once the monitor is closed (on
 *   the monitor's screen, in raw mode, Ctrl-C is a key that closes it), `kill`, a hang-up. The
 *   terminal's kinds (SIGINT, SIGQUIT, SIGHUP) go to the program's whole process group, as the
 *   terminal would have sent them (a wrapper script and the python it waits for both hear Ctrl-C);
 *   SIGTERM goes to the program alone, as before.
 */
export function startChild(
  argv: string[],
  stdio: { stdout: "inherit" | number; stderr: "inherit" | number; stdin: "inherit" | "ignore" },
  extraEnv: Record<string, string> = {},
): Child {
  const keepsTerminal = stdio.stdin === "inherit";
  const spec = launchSpec(argv, { ...process.env, ...extraEnv });
  let proc: Subprocess;
  try {
    proc = Bun.spawn(spec.argv, { env: spec.env, stdin: stdio.stdin, stdout: stdio.stdout, stderr: stdio.stderr, detached: !keepsTerminal });
  } catch (e) {
    throw new Error(`cannot start ${argv[0]}: ${(e as Error).message}`);
  }
  const signals: NodeJS.Signals[] = keepsTerminal ? ["SIGINT", "SIGTERM"] : ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];
  const forward = (sig: NodeJS.Signals) => {
    if (keepsTerminal && sig === "SIGINT" && inForeground()) return; // the terminal sent it to the program too
    try {
      // In its own session the program leads its process group: -pid is that group.
      process.kill(!keepsTerminal && sig !== "SIGTERM" ? -proc.pid : proc.pid, sig);
    } catch {
      // it has just ended
    }
  };
  for (const s of signals) process.on(s, forward);
  const exited = proc.exited.then((code) => {
    for (const s of signals) process.off(s, forward);
    // A program killed by a signal exits as a shell would report it: 128 + the signal's number.
    return proc.signalCode ? 128 + signalNumber(String(proc.signalCode)) : code;
  });
  return { proc, pid: proc.pid, exited };
}

/** Whether our process group is the foreground group of our controlling terminal (/proc/self/stat:
 *  pgrp and tpgid, the fields after the command's name, which may hold spaces and parentheses). */
export function inForeground(): boolean {
  try {
    const stat = readFileSync("/proc/self/stat", "latin1");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pgrp = Number(f[2]);
    const tpgid = Number(f[5]);
    return tpgid > 0 && tpgid === pgrp;
  } catch {
    return false; // no /proc: passing it on is the lesser harm than a program that never hears it
  }
}

/** A signal's number on this system (SIGBUS is 7 on x86 and ARM, 10 on others). */
export function signalNumber(name: string): number {
  return (constants.signals as Record<string, number>)[name] ?? 0;
}
