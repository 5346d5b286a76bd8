#!/usr/bin/env bun
// One sampling session following eight busy agents, by simulation: eight ring writers (the C
// producer the reader's tests use, through the same header as the hook), each writing a real
// transformers GPT-2 training's records again and again (test/fixtures/hf-gpt2.ring, recorded on an
// H200: allocations, frees, segments, phase and step marks as the hook wrote them) at the rate it was
// recorded, the session ticking once a second as every front end does (rings into models, a profile
// per process), beside the same session with no agent, in one run. Reports the share of one core the
// session's ticks take.
//   [GPUMEM_BENCH_AGENTS=N] bun bench/session.ts [OUT_DIR] [SECONDS] [RECORDING]   (N agents, default 8)
// RECORDING (default test/fixtures/hf-gpt2.ring; a .ring.gz is unpacked first) sets what the writers
// write and at what rate: e.g. demo/demo.ring.gz, a GPT-2-small-shaped model at batch 16 × 512 on
// an H100, writes about a third as many records a second as the 45M-parameter fixture at 47 steps/s.
import { mkdirSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { Session } from "../src/collect/session";
import { liveModels } from "../src/commands/live-models";
import { Machine } from "../src/collect/machine";
import { agentDir, plainRing, recordedRate, startWriters } from "./support/busy-agents";

// The session on core 0, the writers on the others (see below): re-run this script pinned, told
// how many cores the machine has (a pinned process sees one).
if (navigator.hardwareConcurrency > 1 && !process.env.GPUMEM_BENCH_CORES && Bun.which("taskset")) {
  const r = Bun.spawnSync(["taskset", "-c", "0", process.execPath, ...process.argv.slice(1)], { env: { ...process.env, GPUMEM_BENCH_CORES: String(navigator.hardwareConcurrency) }, stdout: "inherit", stderr: "inherit" });
  process.exit(r.exitCode ?? 1);
}
/** The machine's cores (this process, pinned, sees one); 1 where it was not re-run pinned. */
const CORES = Number(process.env.GPUMEM_BENCH_CORES ?? 1);
const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const seconds = Number(process.argv[3] ?? 20);
const AGENTS = Number(process.env.GPUMEM_BENCH_AGENTS ?? 8);
const RECORDING = process.argv[4] ?? join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring");
const FIXTURE = plainRing(RECORDING);
// GPUMEM_BENCH_RATE: records a second per agent, where the recording's own rate is not the one to
// match (a GPU host's ranks measured faster, say).
const RATE = Number(process.env.GPUMEM_BENCH_RATE) || Math.round(recordedRate(FIXTURE));

async function follow(dir: string, secs: number) {
  const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: false }));
  const ticks: number[] = [];
  let cpu = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < secs * 1000) {
    const c0 = process.cpuUsage();
    const w0 = performance.now();
    session.tick();
    ticks.push(performance.now() - w0);
    const c = process.cpuUsage(c0);
    cpu += (c.user + c.system) / 1000;
    await Bun.sleep(Math.max(0, 1000 - (performance.now() - w0)));
  }
  const wall = performance.now() - t0;
  const events = [...session.models.byPid.values()].reduce((s, pm) => s + pm.model.eventsIngested, 0);
  const profiles = (session.doc?.processes ?? []).filter((p) => p.pytorch?.profile).length;
  session.close();
  ticks.sort((a, b) => a - b);
  return {
    seconds: Math.round(wall) / 1000,
    ticks: ticks.length,
    cpu_percent_of_a_core: Math.round((cpu / wall) * 10000) / 100,
    tick_ms_median: Math.round(ticks[ticks.length >> 1]! * 100) / 100,
    tick_ms_max: Math.round(ticks[ticks.length - 1]! * 100) / 100,
    events_read: events,
    events_per_second: Math.round(events / (wall / 1000)),
    processes_with_profile: profiles,
  };
}

const idle = await follow(agentDir(), Math.min(10, seconds));
const dir = agentDir();
// On a GPU machine the training processes run on cores of their own: with more than one core
// here, the writers are kept off the session's core (the session pins itself to core 0).
const stopWriters = startWriters(dir, AGENTS, FIXTURE, RATE, seconds, CORES > 1 ? `1-${CORES - 1}` : null);
await Bun.sleep(300);
const busy = await follow(dir, seconds);
stopWriters();

const result = {
  date: new Date().toISOString().slice(0, 10),
  machine: `${process.env.GPUMEM_BENCH_CORES ? CORES : navigator.hardwareConcurrency} cores, ${process.platform}/${process.arch}, bun ${Bun.version}`,
  placement: CORES > 1 ? "the session on core 0, the eight writers on the other cores (as training processes on a GPU machine)" : "unpinned",
  command: `bun bench/session.ts ${outDir} ${seconds}${process.argv[4] ? ` ${process.argv[4]}` : ""}`,
  agents: AGENTS,
  records_per_second_per_agent: RATE,
  source: process.argv[4]
    ? `${process.argv[4]}, its records written again and again at its recorded rate`
    : "test/fixtures/hf-gpt2.ring (a transformers GPT-2 training recorded on an H200), its steps written again and again at its recorded rate",
  idle,
  busy,
  busy_minus_idle_percent_of_a_core: Math.round((busy.cpu_percent_of_a_core - idle.cpu_percent_of_a_core) * 100) / 100,
  target: "one session tick a second with 8 busy agents: at most 10% of a core",
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, process.argv[4] ? `session-${basename(process.argv[4]).replace(/\.ring(\.gz)?$/, "")}.json` : "session.json"), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify(result, null, 1));
