#!/usr/bin/env bun
// The screens following busy agents, as a user runs them: `gpumem-tui` in tmux (200×60, the
// Overview, no key) while N writers replay a real training's ring at a set rate (bench/support/
// busy-agents.ts), beside the same screens with no agent, in one run. The monitor on core 0, the
// writers on the others, as ranks run on cores of their own. Reports the monitor's share of one core
// and its largest resident set, from /proc.
//   bun bench/screens-agents.ts [OUT_DIR] [SECONDS] [AGENTS] [RATE]
// GPUMEM_BENCH_PROF=DIR: the busy monitor runs under Bun's sampling profiler (written to DIR at q).
// RATE: records a second per agent (default: test/fixtures/hf-gpt2.ring's own, ~76k). Four ranks of
// test/gpu/hf_gpt2.py on four H200s wrote ~165k each (bench/results/gpu-2026-11-26-pm/ranks-4.md).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { agentDir, recordedRate, startWriters } from "./support/busy-agents";
import { monitorPane } from "./support/monitor-pane";
import { procUsage } from "./support/proc-usage";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const SECONDS = Number(process.argv[3] ?? 20);
const AGENTS = Number(process.argv[4] ?? 4);
const FIXTURE = join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring");
const RATE = Number(process.argv[5]) || Math.round(recordedRate(FIXTURE));
const CORES = navigator.hardwareConcurrency;
// Seconds the monitor runs before the measured ones (default 4). A busy follower's first half
// minute is mostly the engine compiling (bench/results/cost-38-follow): WARM=40 measures after it.
const WARM = Number(process.env.WARM ?? 4);
const cli = join(import.meta.dir, "..", "src", "cli.ts");
const pin = CORES > 1 && Bun.which("taskset") ? "taskset -c 0 " : "";

async function screens(dir: string, prof = "", warm = 4) {
  const m = monitorPane(`env GPUMEM_TUI_DIR=${dir} NO_COLOR=1 ${pin}${process.execPath} ${prof} ${cli} --interval 1000`, 200, 60);
  await Bun.sleep(warm * 1000); // past start-up and the first reads of the rings (WARM: past the engine's compiles too)
  const pane = m.pane();
  const usage = await procUsage(m.pid, SECONDS);
  await m.quit();
  if (prof) await Bun.sleep(1500); // the profile is written as it quits
  if (process.env.GPUMEM_BENCH_PANE) console.error(pane);
  return { cpu_percent_of_a_core: +usage.cpuPercent.toFixed(2), threads: usage.threads, max_rss_mb: +(usage.maxRssBytes / 2 ** 20).toFixed(1), agents_on_screen: (pane.match(/ sleep \d+/g) ?? []).length };
}

const idle = await screens(agentDir());
const dir = agentDir();
const stop = startWriters(dir, AGENTS, FIXTURE, RATE, SECONDS + WARM + 6, CORES > 1 ? `1-${CORES - 1}` : null);
const profDir = process.env.GPUMEM_BENCH_PROF;
const busy = await screens(dir, profDir ? `--cpu-prof --cpu-prof-md --cpu-prof-dir=${profDir}` : "", WARM);
stop();

const result = {
  date: new Date().toISOString(),
  machine: `${CORES} cores, ${process.platform}/${process.arch}, bun ${Bun.version}`,
  command: `WARM=${WARM} bun bench/screens-agents.ts OUT ${SECONDS} ${AGENTS} ${RATE}`,
  agents: AGENTS,
  records_per_second_per_agent: RATE,
  idle,
  busy,
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `screens-agents-${AGENTS}.json`), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify(result));
