// Where a busy session's tick goes: the models' ingest, the rest of the models' update (the rings
// read), and everything outside the update (NVML, the agents' directory, /proc, the profiles), with
// eight writers replaying a recording at RATE records/s each, as bench/session.ts runs them (the
// writers off core 0 where there are cores for them; pin this script to core 0 yourself).
//   GPUMEM_BENCH_CORES=N taskset -c 0 bun bench/session-split.ts [RATE]     (FIX=RING sets the recording)
// Twelve ticks to warm up, then the mean of ten.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Session } from "../src/collect/session";
import { Machine } from "../src/collect/machine";
import { LiveModels } from "../src/collect/live";
import { buildTool } from "../test/support/native";
import { ProfilerModel } from "../src/profiler";
const RATE = Number(process.argv[2] ?? 61425);
const dir = mkdtempSync(join(tmpdir(), "gpumem-split-")); 
const producer = buildTool("producer");
const sleepers = Array.from({ length: 8 }, () => Bun.spawn(["sleep", "60"]));
const writers = sleepers.map((s) => {
  const ring = join(dir, `${s.pid}.ring`);
  const w = Bun.spawn([...(navigator.hardwareConcurrency > 2 ? ["taskset", "-c", `1-${navigator.hardwareConcurrency - 1}`] : []), producer, ring, String(1 << 20), String(RATE * 40), "--replay", process.env.FIX ?? "test/fixtures/normal.ring", "--rate", String(RATE), "--pid", String(s.pid)], { stdout: "ignore", stderr: "ignore" });
  writeFileSync(join(dir, `${s.pid}.json`), JSON.stringify({ version: 1, pid: s.pid, cmdline: ["train.py"], devices: [0], hook_mode: "hook", ring, socket: null }), { mode: 0o600 });
  return w;
});
await Bun.sleep(300);
let upd = 0;
let ing = 0;
const origIngest = ProfilerModel.prototype.ingest;
ProfilerModel.prototype.ingest = function (...a: Parameters<typeof origIngest>) { const t = performance.now(); origIngest.apply(this, a); ing += performance.now() - t; };
const orig = LiveModels.prototype.update;
LiveModels.prototype.update = function (...a: Parameters<typeof orig>) { const t = performance.now(); orig.apply(this, a); upd += performance.now() - t; };
const session = new Session(new Machine({ agentDir: dir }), () => new LiveModels({ keepTrace: false }));
let total = 0; const n = 12;
for (let i = 0; i < n; i++) { const t = performance.now(); session.tick(); if (i >= 2) total += performance.now() - t; await Bun.sleep(1000 - (performance.now() - t)); }
upd = 0; total = 0; ing = 0;
for (let i = 0; i < 10; i++) { const t = performance.now(); session.tick(); total += performance.now() - t; await Bun.sleep(1000 - (performance.now() - t)); }
console.log(`rate ${RATE}: tick ${(total / 10).toFixed(1)} ms, of which models.update ${(upd / 10).toFixed(1)} ms (the models' ingest ${(ing / 10).toFixed(1)} ms, the rest of it the ring reads) ; outside the update ${((total - upd) / 10).toFixed(1)} ms`);
for (const p of [...writers, ...sleepers]) p.kill();
session.close();
