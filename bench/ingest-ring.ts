#!/usr/bin/env bun
// The model's ingest of a real training's records, this tree beside another checkout (OLD_TREE) in
// one run: test/fixtures/hf-gpt2.ring (a 45M-parameter GPT-2 recorded on an H100), frees folded as
// the live reader gives them, fed again and again into one model the way a live ring feeds it (in
// batches of 8,192, each lap's steps and times moved on, the trace kept as the screens keep it).
// Each tree's model takes LAPS laps in turns of ten; the first WARM laps of each are the JIT's.
// Reports ns a record (median and quartiles over the laps after warm-up) and the ratio.
// NAMES=FILE (e.g. test/fixtures/hf-gpt2.names.json, the agent's names of that run): each model
// takes them after its first lap, as a live model takes a running agent's answer, and carries
// them to the tensors made again in every later step.
// JOIN=F (0 < F < 1): the records from the first step that begins past that fraction of the
// recording on, each lap's addresses moved to a range of their own, so that no lap ever sees the
// segments its blocks lie in: a monitor that joined a running training (the screens and `--json`
// opened during it, an attach), where the ring no longer holds the segments' allocs.
// STACKS_AB=1: instead of another tree, this tree twice on the same records, one model reading the
// alloc records' stack ids (extra) with the manifest's stacks beside FIX (FIX.json, or FIX less
// .ring/.ring.gz plus .json), the other without: what the hook's stacks cost the ingest a record.
//   bun bench/ingest-ring.ts [OUT_DIR] [OLD_TREE]     (LAPS, WARM, FIX: the recording; NAMES; STACKS_AB)
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const oldTree = process.argv[3] ? resolve(process.argv[3]) : null;
const here = resolve(import.meta.dir, "..");
const FIXTURE = process.env.FIX ?? join(here, "test", "fixtures", "hf-gpt2.ring");
const LAPS = Number(process.env.LAPS ?? 160);
const WARM = Number(process.env.WARM ?? 60);
const BATCH = 8192;

type Batch = Record<string, Float64Array | Uint8Array | Int8Array | Uint32Array | number> & { count: number; step: Uint32Array; time_us: Float64Array };
interface Side {
  label: string;
  model: { ingest(b: Batch, lost: number, start: number, end: number): void; setNames(t: unknown[]): unknown };
  newBatch: (n: number) => Batch;
  times: number[];
}

async function side(label: string, root: string, stacks = false): Promise<Side> {
  const { createModel } = await import(join(root, "src", "profiler", "index.ts"));
  const { newEventBatch } = await import(join(root, "src", "ffi", "events.ts"));
  const model = createModel().keepTrace();
  if (stacks) {
    // As a replay reads a recording with stacks: the record fields and the manifest's table.
    const { openRingRecording } = await import(join(root, "src", "collect", "recording.ts"));
    const { recordFields } = await import(join(root, "src", "system", "manifest.ts"));
    const rec = openRingRecording(FIXTURE);
    model.setRecordFields({ ...recordFields(rec.manifest), allocStacks: true });
    model.stacks = rec.stacks;
    rec.close();
  }
  return { label, model, newBatch: newEventBatch, times: [] };
}

const { openRing } = await import(join(here, "src", "ffi", "ring.ts"));
const { newEventBatch, isMark } = await import(join(here, "src", "ffi", "events.ts"));
const ring = openRing(FIXTURE, { fold: true, copy: true });
const all = newEventBatch(1 << 21) as unknown as Batch;
ring.read(all);
ring.close();
// JOIN: the part a joined monitor reads (from a step's start), and each lap's address offset.
const JOIN = Number(process.env.JOIN ?? 0);
let first = 0;
if (JOIN > 0) {
  first = Math.floor(all.count * JOIN);
  const s0 = all.step[first]!;
  while (first < all.count && all.step[first] === s0) first++;
  for (const c of Object.keys(all).filter((k) => typeof all[k] !== "number")) (all as Record<string, Float64Array>)[c]!.copyWithin(0, first, all.count);
  all.count -= first;
}
/** Each lap's addresses lie this far past the last one's (2^40: beyond any device's memory). */
const LAP_SPACE = JOIN > 0 ? 2 ** 40 : 0;
const N = all.count;
let maxStep = 0;
for (let i = 0; i < N; i++) maxStep = Math.max(maxStep, all.step[i]!);
const span = all.time_us[N - 1]! - all.time_us[0]! + 1;
const columns = Object.keys(all).filter((k) => typeof all[k] !== "number");

const stacksAB = process.env.STACKS_AB === "1";
const sides = stacksAB ? [await side("stacks", here, true), await side("no stacks", here)] : [await side("new", here), ...(oldTree ? [await side("old", oldTree)] : [])];
const names: unknown[] | null = process.env.NAMES ? JSON.parse(readFileSync(process.env.NAMES, "utf8")).names : null;
const chunks = new Map(sides.map((s) => [s, s.newBatch(BATCH)]));
function lap(s: Side, k: number): void {
  const chunk = chunks.get(s)!;
  let ms = 0;
  for (let from = 0; from < N; from += BATCH) {
    const n = Math.min(BATCH, N - from);
    for (const c of columns) (chunk[c] as Float64Array).set((all[c] as Float64Array).subarray(from, from + n));
    for (let i = 0; i < n; i++) {
      chunk.step[i] = all.step[from + i]! + k * (maxStep + 1);
      chunk.time_us[i] = all.time_us[from + i]! + k * span;
    }
    if (LAP_SPACE > 0) {
      const address = chunk.address as Float64Array;
      const action = chunk.action as Uint8Array;
      for (let i = 0; i < n; i++) if (!isMark(action[i]!)) address[i] = address[i]! + (k + 1) * LAP_SPACE;
    }
    chunk.count = n;
    const t = performance.now();
    s.model.ingest(chunk, 0, 0, n);
    ms += performance.now() - t;
  }
  s.times.push((ms * 1e6) / N);
  if (k === 0 && names) s.model.setNames(names);
}
for (let k = 0; k < LAPS; k += 10) for (const s of sides) for (let j = k; j < Math.min(LAPS, k + 10); j++) lap(s, j);

const q = (xs: number[], f: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * f)]!;
const rows = sides.map((s) => {
  const steady = s.times.slice(WARM);
  return { tree: s.label, median_ns: +q(steady, 0.5).toFixed(1), p25_ns: +q(steady, 0.25).toFixed(1), p75_ns: +q(steady, 0.75).toFixed(1), laps: steady.length };
});
const result = {
  date: new Date().toISOString(),
  machine: `${navigator.hardwareConcurrency} cores, ${process.platform}/${process.arch}, bun ${Bun.version}`,
  command: `${JOIN > 0 ? `JOIN=${JOIN} ` : ""}${process.env.NAMES ? `NAMES=${process.env.NAMES} ` : ""}${stacksAB ? "STACKS_AB=1 " : ""}FIX=${FIXTURE} bun bench/ingest-ring.ts OUT${oldTree ? " OLD_TREE" : ""}`,
  records_per_lap: N,
  joined_at_record: JOIN > 0 ? first : null,
  rows,
  old_over_new: rows.length === 2 && !stacksAB ? +(rows[1]!.median_ns / rows[0]!.median_ns).toFixed(2) : null,
  stacks_over_none: stacksAB ? +(rows[0]!.median_ns / rows[1]!.median_ns).toFixed(3) : null,
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "ingest-ring.json"), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify(result));
