// `gpumem-tui run -- CMD`: the program with the agent injected, and the monitor or NDJSON samples on it.
import { liveModels } from "./live-models";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  const { startChild: start0 } = await import("../collect/child");
  // The agents of this program leave their last files to us at exit, for the final document
  // (docs/protocol.md, "The end of a run"); we remove them once read.
  const handoff = { GPUMEM_TUI_MONITOR_PID: String(process.pid) };
  const startChild: typeof start0 = (argv, stdio, env = {}) => start0(argv, stdio, { ...env, ...handoff });
  if (opts.json) {
    // The program keeps the terminal (stdin, stdout, stderr untouched); samples go to a file.
    const { Machine } = await import("../collect/machine");
    const { runJson } = await import("../headless/run");
    // The line profiler's results (gpumem_agent.profile) land beside the samples at exit; the
    // name is checked before the program starts, as the output's is (runJson).
    const output = opts.output ?? "gpumem-tui-run.ndjson";
    const lines = process.env.GPUMEM_PROFILE_JSON ?? `${output.replace(/\.ndjson$/, "")}.lines.json`;
    const start = () => startChild(opts.rest, { stdin: "inherit", stdout: "inherit", stderr: "inherit" }, { GPUMEM_PROFILE_JSON: lines });
    const { Session } = await import("../collect/session");
    const machine = new Machine();
    try {
      return await runJson(new Session(machine, liveModels({ keepTrace: false })), start, { output, intervalMs: opts.intervalMs, lines });
    } finally {
      machine.close();
    }
  }
  const [{ runMonitorOnChild }, { Machine }, { Session }] = await Promise.all([loadScreens(), import("../collect/machine"), import("../collect/session")]);
  // The screens close the session once they end, before waiting for the program.
  return await runMonitorOnChild(opts, startChild, new Session(new Machine(), liveModels({ keepTrace: true, screens: true })));
}
