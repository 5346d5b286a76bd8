#!/usr/bin/env bun
// What the engine compiles while monitors follow one simulated busy rank (test/fixtures/hf-gpt2.ring
// at its recorded rate, bench/support/busy-agents.ts): each LABEL:TREE:WHAT runs TREE's bundle
// (dist/cli.js, built by the caller) on core 0 with JSC's compile report on (BUN_JSC_reportCompileTimes),
// WHAT a screen's key (1 Overview, 2 Process, 3 Tensors; in tmux, bench/monitor-cost.ts) or `json`
// (`--json`). For each: its CPU over SECONDS after 2 s, the compiler thread's share of it, every
// compile's milliseconds (the compiler thread's work) and those after AFTER s (default 30), and the
// functions that took the most.
//   [AFTER=S] bun bench/follow-compiles.ts SECONDS LABEL:TREE:WHAT...
import { readFileSync } from "node:fs";
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
const specs = which.map((w) => {
  const [label, tree, what] = w.split(":") as [string, string, string];
  const log = join(tmpdir(), `gpumem-compiles-${process.pid}-${label}.log`);
  logs.set(label, log);
  // a small program prefixed to each report line: when it came, in seconds from the start
  const stamp = `awk -v t0=$(date +%s.%N) '{ "date +%s.%N" | getline t; close("date +%s.%N"); printf "%.1f %s\\n", t - t0, $0 }' > ${log}`;
  const run = `env GPUMEM_TUI_DIR=${dir} BUN_JSC_reportCompileTimes=true ${pin}${process.execPath} ${tree}/dist/cli.js`;
  return what === "json" ? `${label}=${run} --json --interval 1000 2> >(${stamp}) > /dev/null` : `${label}@${what}=${run} --interval 1000 2> >(${stamp})`;
});
let result;
try {
  result = await monitorCost(specs, SECONDS, 2);
} finally {
  stop();
}
await Bun.sleep(500);
for (const [label, log] of logs) {
  let text = "";
  try {
    text = readFileSync(log, "utf8");
  } catch {
    console.log(`${label}: no compile report (${log})`);
    continue;
  }
  const by = new Map<string, { n: number; ms: number }>();
  let total = 0;
  let late = 0;
  for (const line of text.split("\n")) {
    const m = /^([\d.]+) Optimized (\S+?)#.* using \w+ with \w+ into \d+ bytes in ([\d.]+) ms/.exec(line);
    if (!m) continue;
    const ms = Number(m[3]);
    total += ms;
    if (Number(m[1]) >= AFTER) late += ms;
    const e = by.get(m[2]!) ?? { n: 0, ms: 0 };
    e.n++;
    e.ms += ms;
    by.set(m[2]!, e);
  }
  const run = result.runs.find((r) => r.label === label) as { cpu_percent_of_a_core?: number; jit_percent_of_a_core?: number } | undefined;
  console.log(`${label}: ${run?.cpu_percent_of_a_core}% of a core over ${SECONDS} s (the compiler thread ${run?.jit_percent_of_a_core}%); compiles ${total.toFixed(0)} ms in all, ${late.toFixed(0)} ms after ${AFTER} s`);
  console.log(`  ${[...by].sort((a, b) => b[1].ms - a[1].ms).slice(0, 8).map(([f, e]) => `${f} ${e.ms.toFixed(0)} ms (${e.n})`).join(", ")}`);
}
