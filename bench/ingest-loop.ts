#!/usr/bin/env bun
// How much of the model's ingest a tree spends inside its run of allocator records
// (DeviceState.allocatorRecords, timed around each call) on test/fixtures/hf-gpt2.ring fed lap after
// lap as bench/ingest-ring.ts feeds it: ns a record in all and inside, the median of the laps after
// the first half, the least of RUNS runs (the machine's other work only ever adds).
//   bun bench/ingest-loop.ts [TREE]     (RUNS, default 4; LAPS, default 200)
import { join, resolve } from "node:path";

const root = resolve(process.argv[2] ?? join(import.meta.dir, ".."));
const RUNS = Number(process.env.RUNS ?? 4);
const LAPS = Number(process.env.LAPS ?? 200);
const { openRing } = await import(join(root, "src", "ffi", "ring.ts"));
const { newEventBatch } = await import(join(root, "src", "ffi", "events.ts"));
const { createModel } = await import(join(root, "src", "profiler", "index.ts"));
const { DeviceState } = await import(join(root, "src", "profiler", "device.ts"));
const ring = openRing(join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring"), { fold: true, copy: true });
type Cols = Record<string, Float64Array> & { count: number };
const all = newEventBatch(1 << 21) as unknown as Cols;
ring.read(all);
ring.close();
const N = all.count;
let maxStep = 0;
for (let i = 0; i < N; i++) maxStep = Math.max(maxStep, all.step![i]!);
const span = all.time_us![N - 1]! - all.time_us![0]! + 1;
const cols = Object.keys(all).filter((k) => typeof all[k] !== "number");
let inside = 0;
const own = DeviceState.prototype.allocatorRecords;
DeviceState.prototype.allocatorRecords = function (this: unknown, ...args: unknown[]) {
  const t = performance.now();
  const r = own.apply(this, args);
  inside += performance.now() - t;
  return r;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
let best = { all: Infinity, inside: Infinity };
for (let run = 0; run < RUNS; run++) {
  const m = createModel().keepTrace();
  const chunk = newEventBatch(8192) as unknown as Cols;
  const total: number[] = [];
  const within: number[] = [];
  for (let k = 0; k < LAPS; k++) {
    let ms = 0;
    inside = 0;
    for (let from = 0; from < N; from += 8192) {
      const n = Math.min(8192, N - from);
      for (const c of cols) chunk[c]!.set(all[c]!.subarray(from, from + n));
      for (let i = 0; i < n; i++) {
        chunk.step![i] = all.step![from + i]! + k * (maxStep + 1);
        chunk.time_us![i] = all.time_us![from + i]! + k * span;
      }
      chunk.count = n;
      const t = performance.now();
      m.ingest(chunk as never, 0, 0, n);
      ms += performance.now() - t;
    }
    total.push((ms * 1e6) / N);
    within.push((inside * 1e6) / N);
  }
  const a = median(total.slice(LAPS >> 1));
  const w = median(within.slice(LAPS >> 1));
  if (w < best.inside) best = { all: a, inside: w };
}
console.log(JSON.stringify({ tree: root, records_per_lap: N, all_ns: +best.all.toFixed(1), inside_ns: +best.inside.toFixed(1) }));
