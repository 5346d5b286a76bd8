// The program `gpumem-tui run` starts: the agent injected, its exit code passed through, and
// signals that reach us (Ctrl-C in the terminal, SIGTERM from a scheduler) passed on to it.
import type { Subprocess } from "bun";
import { launchSpec } from "../launch";

export interface Child {
  proc: Subprocess;
  pid: number;
  exited: Promise<number>;
}

export function startChild(
  argv: string[],
  stdio: { stdout: "inherit" | number; stderr: "inherit" | number; stdin: "inherit" | "ignore" },
  extraEnv: Record<string, string> = {},
): Child {
  const spec = launchSpec(argv, { ...process.env, ...extraEnv });
  let proc: Subprocess;
  try {
    proc = Bun.spawn(spec.argv, { env: spec.env, stdin: stdio.stdin, stdout: stdio.stdout, stderr: stdio.stderr });
  } catch (e) {
    throw new Error(`cannot start ${argv[0]}: ${(e as Error).message}`);
  }
  const forward = (sig: NodeJS.Signals) => () => proc.kill(sig);
  const onInt = forward("SIGINT");
  const onTerm = forward("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  const exited = proc.exited.then((code) => {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
    // A program killed by a signal exits as a shell would report it: 128 + the signal's number.
    return proc.signalCode ? 128 + (signalNumber(String(proc.signalCode)) ?? 0) : code;
  });
  return { proc, pid: proc.pid, exited };
}

function signalNumber(name: string): number | undefined {
  const table: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15, SIGABRT: 6 };
  return table[name];
}
