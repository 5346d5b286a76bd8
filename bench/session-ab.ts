#!/usr/bin/env bun
// A busy session's tick in this tree beside another checkout's (OLD_TREE), in one process and one
// run: AGENTS writers replay a real training's recording at RATE records/s each (bench/support/
// busy-agents.ts, off core 0 where there are cores for them), and each tree's session (its own
// Machine and models, the models keeping their trace as the screens' do) follows the same rings,
// ticking in turn, the order swapped every tick. A machine whose speed drifts (a shared VM) moves
// both trees' ticks alike, so the ratio holds where one tree's figure from one run to the next does not.
// Twelve ticks each to warm up, then TICKS; reports each tree's median tick and records a tick.
//   GPUMEM_BENCH_CORES=N taskset -c 0 bun bench/session-ab.ts OUT_DIR OLD_TREE [RATE] [AGENTS]   (FIX=RING, TICKS)
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { agentDir, startWriters } from "./support/busy-agents";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const oldTree = process.argv[3] ? resolve(process.argv[3]) : null;
if (!oldTree) throw new Error("usage: bun bench/session-ab.ts OUT_DIR OLD_TREE [RATE] [AGENTS]");
const RATE = Number(process.argv[4] ?? 165_000);
const AGENTS = Number(process.argv[5] ?? 4);
const TICKS = Number(process.env.TICKS ?? 20);
const FIX = process.env.FIX ?? "test/fixtures/hf-gpt2.ring";
const CORES = Number(process.env.GPUMEM_BENCH_CORES ?? navigator.hardwareConcurrency);
const here = resolve(import.meta.dir, "..");

interface Side {
  label: string;
  tick: () => void;
  close: () => void;
  records: () => number;
  ms: number[];
  reads: number[];
}

async function side(label: string, root: string, dir: string): Promise<Side> {
  const { Session } = await import(join(root, "src", "collect", "session.ts"));
  const { Machine } = await import(join(root, "src", "collect", "machine.ts"));
  const { LiveModels } = await import(join(root, "src", "collect", "live.ts"));
  let models: { byPid: Map<number, { model: { eventsIngested: number } }> } | null = null;
  const session = new Session(new Machine({ agentDir: dir }), () => (models = new LiveModels({ keepTrace: true })));
  const records = () => [...(models?.byPid.values() ?? [])].reduce((n, pm) => n + pm.model.eventsIngested, 0);
  return { label, tick: () => session.tick(), close: () => session.close(), records, ms: [], reads: [] };
}

const dir = agentDir();
const stop = startWriters(dir, AGENTS, FIX, RATE, 12 + TICKS + 10, CORES > 1 ? `1-${CORES - 1}` : null);
await Bun.sleep(300);
const sides = [await side("new", here, dir), await side("old", oldTree, dir)];
for (let i = 0; i < 12 + TICKS; i++) {
  const t0 = performance.now();
  for (const s of i % 2 ? [...sides].reverse() : sides) {
    const before = s.records();
    const t = performance.now();
    s.tick();
    if (i >= 12) {
      s.ms.push(performance.now() - t);
      s.reads.push(s.records() - before);
    }
  }
  await Bun.sleep(Math.max(0, 1000 - (performance.now() - t0)));
}
stop();
for (const s of sides) s.close();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rows = sides.map((s) => ({ tree: s.label, tick_ms_median: +median(s.ms).toFixed(1), events_a_tick_median: median(s.reads), ticks: s.ms.length }));
const result = {
  date: new Date().toISOString(),
  machine: `${CORES} cores, ${process.platform}/${process.arch}, bun ${Bun.version}`,
  command: `GPUMEM_BENCH_CORES=${CORES} taskset -c 0 bun bench/session-ab.ts OUT OLD_TREE ${RATE} ${AGENTS}`,
  recording: FIX,
  rows,
  old_over_new: +(rows[1]!.tick_ms_median / rows[0]!.tick_ms_median).toFixed(2),
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, `session-ab-${AGENTS}.json`), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify(result));
