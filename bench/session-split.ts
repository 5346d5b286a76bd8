// Where a busy session's tick goes: the models' ingest, the rest of the models' update (the rings
// read), and everything outside the update (NVML, the agents' directory, /proc, the profiles), with
// AGENTS writers replaying a recording at RATE records/s each (bench/support/busy-agents.ts; the
// writers off core 0 where there are cores for them; pin this script to core 0 yourself). The
// models keep their trace, as the screens' do (KEEP_TRACE=0: as the headless front ends').
//   GPUMEM_BENCH_CORES=N taskset -c 0 bun bench/session-split.ts [RATE] [AGENTS]   (FIX=RING sets the recording)
// Twelve ticks to warm up, then the mean of ten, and the costs per record read.
import { Session } from "../src/collect/session";
import { Machine } from "../src/collect/machine";
import { LiveModels } from "../src/collect/live";
import { ProfilerModel } from "../src/profiler";
import { agentDir, startWriters } from "./support/busy-agents";

const RATE = Number(process.argv[2] ?? 61425);
const AGENTS = Number(process.argv[3] ?? 8);
const CORES = Number(process.env.GPUMEM_BENCH_CORES ?? navigator.hardwareConcurrency);
const dir = agentDir();
const stop = startWriters(dir, AGENTS, process.env.FIX ?? "test/fixtures/normal.ring", RATE, 40, CORES > 1 ? `1-${CORES - 1}` : null);
await Bun.sleep(300);
let upd = 0;
let ing = 0;
let records = 0;
const origIngest = ProfilerModel.prototype.ingest;
ProfilerModel.prototype.ingest = function (...a: Parameters<typeof origIngest>) {
  const t = performance.now();
  origIngest.apply(this, a);
  ing += performance.now() - t;
  records += (a[3] ?? a[0].count) - (a[2] ?? 0);
};
const orig = LiveModels.prototype.update;
LiveModels.prototype.update = function (...a: Parameters<typeof orig>) {
  const t = performance.now();
  orig.apply(this, a);
  upd += performance.now() - t;
};
const session = new Session(new Machine({ agentDir: dir }), () => new LiveModels({ keepTrace: process.env.KEEP_TRACE !== "0" }));
let total = 0;
for (let i = 0; i < 12; i++) {
  const t = performance.now();
  session.tick();
  await Bun.sleep(1000 - (performance.now() - t));
}
upd = 0;
ing = 0;
records = 0;
for (let i = 0; i < 10; i++) {
  const t = performance.now();
  session.tick();
  total += performance.now() - t;
  await Bun.sleep(1000 - (performance.now() - t));
}
const ns = (ms: number) => ((ms * 1e6) / records).toFixed(1);
console.log(
  `rate ${RATE} × ${AGENTS} agents: tick ${(total / 10).toFixed(1)} ms, of which models.update ${(upd / 10).toFixed(1)} ms (the models' ingest ${(ing / 10).toFixed(1)} ms, the rest of it the ring reads); outside the update ${((total - upd) / 10).toFixed(1)} ms. ` +
    `Per record read (${(records / 10).toFixed(0)} a tick): ingest ${ns(ing)} ns, the rest of the update ${ns(upd - ing)} ns`,
);
stop();
session.close();
