#!/usr/bin/env bun
// What the engine compiles while monitors follow one simulated busy rank (test/fixtures/hf-gpt2.ring
// at its recorded rate, bench/support/busy-agents.ts): each LABEL:TREE:WHAT runs TREE's bundle
// (dist/cli.js, built by the caller) on core 0 with JSC's compile report on (BUN_JSC_reportCompileTimes),
// WHAT a screen's key (1 Overview, 2 Process, 3 Tensors; in tmux, bench/monitor-cost.ts) or `json`
// (`--json`). For each: its CPU over SECONDS after 2 s, the compiler thread's share of it, every
// compile's milliseconds (the compiler thread's work) and those after AFTER s (default 30), and the
// functions that took the most.
//   [AFTER=S] bun bench/follow-compiles.ts SECONDS LABEL:TREE:WHAT...
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentDir, recordedRate, startWriters } from "./support/busy-agents";
import { monitorCost } from "./monitor-cost";

const [secsArg, ...which] = process.argv.slice(2);
if (!secsArg || which.length === 0) {
  process.stderr.write("usage: [AFTER=S] bun bench/follow-compiles.ts SECONDS LABEL:TREE:WHAT...\n");
  process.exit(2);
}
const SECONDS = Number(secsArg);
const AFTER = Number(process.env.AFTER ?? 30);
const FIXTURE = join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring");
const dir = agentDir();
const cores = navigator.hardwareConcurrency;
const stop = startWriters(dir, 1, FIXTURE, Math.round(recordedRate(FIXTURE)), SECONDS + 30, cores > 1 ? `1-${cores - 1}` : null);
const pin = cores > 1 && Bun.which("taskset") ? "taskset -c 0 " : "";
const logs = new Map<string, string>();
const here = join(import.meta.dir, "support");
const specs = which.map((w) => {
  const [label, tree, what] = w.split(":") as [string, string, string];
  const log = join(tmpdir(), `gpumem-compiles-${process.pid}-${label}.log`);
  logs.set(label, log);
  // the report's lines timed by its size once a second (a reader stamping each line falls behind)
  const run = `env GPUMEM_TUI_DIR=${dir} BUN_JSC_reportCompileTimes=true ${pin}bash ${here}/stamp-stderr.sh ${log} ${process.execPath} ${tree}/dist/cli.js`;
  return what === "json" ? `${label}=${run} --json --interval 1000 > /dev/null` : `${label}@${what}=${run} --interval 1000`;
});
let result;
try {
  result = await monitorCost(specs, SECONDS, 2);
} finally {
  stop();
}
await Bun.sleep(500);
for (const [label, log] of logs) {
  const run = result.runs.find((r) => r.label === label) as { cpu_percent_of_a_core?: number; jit_percent_of_a_core?: number } | undefined;
  console.log(`${label}: ${run?.cpu_percent_of_a_core}% of a core over ${SECONDS} s (the compiler thread ${run?.jit_percent_of_a_core}%)`);
  // the compiles by 10 s and those that took the most after AFTER s (bench/support/compile-report.py)
  const report = Bun.spawnSync(["python3", join(here, "compile-report.py"), log, String(AFTER), "10", "8"], { stdout: "pipe", stderr: "pipe" });
  console.log(report.exitCode === 0 ? report.stdout.toString().trimEnd() : `  no compile report (${log}): ${report.stderr.toString().trim()}`);
}
