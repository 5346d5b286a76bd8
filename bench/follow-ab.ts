#!/usr/bin/env bun
// This tree and an earlier one following the same simulated busy ranks over the same seconds: N
// writers replay a real training's ring at RATE records/s each (bench/support/busy-agents.ts, on the
// cores past the first), and each tree's bundle watches them: the screens on Overview, Process and
// Tensors, and `--json` (the session `run --json` runs), all on core 0 (bench/monitor-cost.ts). With
// AGENTS 0: the idle screens and `--json` of both trees (no GPU here: no NVML, no agent; the
// Overview says so and has nothing to chart).
//   [WARM=S] bun bench/follow-ab.ts OUT_DIR EARLIER_TREE [SECONDS] [AGENTS] [RATE]
// EARLIER_TREE: a checkout of the earlier commit with its own node_modules (its bundle is built here).
// WARM: seconds every monitor runs before the measured ones (default 4). The engine's compiler
// works for the first 30 s or so of a busy follower (the model's per-record loop alone takes
// 0.2-0.5 s of CPU to compile, once): WARM=40 measures what it costs after that, the default
// what its first half minute costs.
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { agentDir, recordedRate, startWriters } from "./support/busy-agents";
import { monitorCost } from "./monitor-cost";

const [outArg, earlierArg, secondsArg, agentsArg, rateArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: bun bench/follow-ab.ts OUT_DIR EARLIER_TREE [SECONDS] [AGENTS] [RATE]\n");
  process.exit(2);
}
const SECONDS = Number(secondsArg ?? 20);
const WARM = Number(process.env.WARM ?? 4);
const AGENTS = Number(agentsArg ?? 1);
const FIXTURE = join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring");
const RATE = Number(rateArg) || Math.round(recordedRate(FIXTURE));
const CORES = navigator.hardwareConcurrency;
const trees = { now: resolve(import.meta.dir, ".."), before: resolve(earlierArg) };
for (const root of Object.values(trees)) {
  const b = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`bun run build:bundle in ${root} failed: ${b.stderr}`);
}
const commit = (dir: string) => Bun.spawnSync(["git", "-C", dir, "log", "-1", "--format=%h"]).stdout.toString().trim();
const dirty = Bun.spawnSync(["git", "-C", trees.now, "status", "--porcelain", "--", "src", "patches"]).stdout.length ? " + changes" : "";
const pin = CORES > 1 && Bun.which("taskset") ? "taskset -c 0 " : "";
const dir = agentDir();
const stop = AGENTS > 0 ? startWriters(dir, AGENTS, FIXTURE, RATE, SECONDS + WARM + 20, CORES > 1 ? `1-${CORES - 1}` : null) : () => {};
const specs: string[] = [];
for (const [label, root] of Object.entries(trees)) {
  const run = `env GPUMEM_TUI_DIR=${dir} ${pin}${process.execPath} ${root}/dist/cli.js`;
  for (const key of AGENTS > 0 ? ["1", "2", "3"] : ["1"]) specs.push(`screens-${label}@${key}=${run} --interval 1000`);
  specs.push(`json-${label}=${run} --json --interval 1000 > /dev/null`);
}
let result;
try {
  result = await monitorCost(specs, SECONDS, WARM);
} finally {
  stop();
}
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
const name = `follow-ab-${AGENTS}${WARM === 4 ? "" : `-warm${WARM}`}`;
const record = { command: `${WARM === 4 ? "" : `WARM=${WARM} `}bun bench/follow-ab.ts OUT ${earlierArg} ${SECONDS} ${AGENTS} ${RATE}`, now: `${commit(trees.now)}${dirty}`, before: commit(trees.before), machine: `${CORES} cores, bun ${Bun.version}`, agents: AGENTS, records_per_second_per_agent: RATE, ...result };
writeFileSync(join(out, `${name}.json`), `${JSON.stringify(record, null, 1)}\n`);
const cpu = (label: string, key: string | null) => result.runs.find((r) => r.label === label && r.key === key);
const rows = specs.map((s) => s.slice(0, s.indexOf("="))).filter((l) => l.includes("-now")).map((l) => {
  const [label, key] = l.split("@") as [string, string | undefined];
  type Run = { cpu_percent_of_a_core?: number; max_rss_mib?: number; jit_percent_of_a_core?: number };
  const now = cpu(label, key ?? null) as Run;
  const before = cpu(label.replace("-now", "-before"), key ?? null) as Run;
  const ratio = now?.cpu_percent_of_a_core && before?.cpu_percent_of_a_core ? (before.cpu_percent_of_a_core / now.cpu_percent_of_a_core).toFixed(2) : "n/a";
  const cell = (r: Run) => `${r?.cpu_percent_of_a_core}% (compiler ${r?.jit_percent_of_a_core ?? "n/a"}%), ${r?.max_rss_mib} MiB`;
  return `| ${label.replace("-now", "")}${key ? ` (screen ${key})` : ""} | ${cell(before)} | ${cell(now)} | ${ratio} |`;
});
const md = `# Following ${AGENTS} simulated busy rank${AGENTS === 1 ? "" : "s"}: ${record.before} against ${record.now}

Command: \`${record.command}\` (${record.date}, ${record.machine}); ${AGENTS ? `${AGENTS} writer${AGENTS === 1 ? "" : "s"} at ${RATE} records/s each replaying test/fixtures/hf-gpt2.ring` : "no agent, no GPU: the idle screens here"}; every monitor on core 0 over the same ${SECONDS} s, after ${WARM} s.

| what | before (% of a core, of it the engine's compiler thread, max RSS) | now | before / now |
| --- | --- | --- | --- |
${rows.join("\n")}
`;
writeFileSync(join(out, `${name}.md`), md);
console.log(md);
