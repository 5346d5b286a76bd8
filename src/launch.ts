// Starting a program with the agent injected: `gpumem-tui run -- python train.py`.
// The agent's sitecustomize goes first on PYTHONPATH; it attaches once the program imports torch
// and then runs any sitecustomize of the program's own. GPUMEM_TUI_DISABLE=1 turns it off.
// Nothing else changes: argv, stdin, stdout, stderr and the exit code are the program's.
import { join } from "node:path";
import { ROOT } from "./root";

export const AGENT_ROOT = join(ROOT, "agent");
export const INJECT_DIR = join(AGENT_ROOT, "gpumem_agent", "_inject");

/** The environment for the child: the parent's, with the agent's directories first on PYTHONPATH. */
export function agentEnv(env: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  if (out.GPUMEM_TUI_DISABLE === "1") return out;
  const rest = out.PYTHONPATH ? `:${out.PYTHONPATH}` : "";
  out.PYTHONPATH = `${INJECT_DIR}:${AGENT_ROOT}${rest}`;
  return out;
}

export interface Launch {
  argv: string[];
  env: Record<string, string>;
}

/** What to spawn for `gpumem-tui run -- ARGV`: the program's own argv, the agent's environment. */
export function launchSpec(argv: string[], env: Record<string, string | undefined> = process.env): Launch {
  if (argv.length === 0 || argv[0] === "") throw new Error("run needs a program: gpumem-tui run -- python train.py");
  return { argv: [...argv], env: agentEnv(env) };
}
