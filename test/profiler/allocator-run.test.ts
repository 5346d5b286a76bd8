// The allocator's records are accounted in runs (DeviceState.allocatorRecords: one loop over the
// records the same stamps cover, the block table's sums kept on columns read once a run). Two
// things must hold on every committed recording, frees folded as the live reader gives them and
// not folded as a replay of a snapshot's trace gives them:
// - the running sums equal the sums over the live blocks (bytes and blocks by category, bytes by
//   range, blocks above 1 MiB), so the run and BlockTable's own add/discard keep them alike;
// - a model fed one record at a time (every run one record long) ends exactly where a model fed
//   in big batches ends: totals, counts, steps and their figures, blocks, the timeline.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ACTION, isMark, newEventBatch, type EventBatch } from "../../src/ffi/events";
import { openRingBuffer } from "../../src/ffi/ring";
import { ROOT } from "../../src/ffi/build";
import { createModel, type DeviceState, type ProfilerModel } from "../../src/profiler";
import { LARGE } from "../../src/profiler/blocks";
import { N_CAT } from "../../src/profiler/categories";
import { Timeline } from "../../src/profiler/timeline";

const RINGS = [
  ...["normal.ring", "hf-gpt2.ring", "oom.ring", "kept-loss-graph.ring", "no-zero-grad.ring", "normal-history.ring", "hf-gpt2-leak.ring.gz", "compile-graphs.ring.gz"].map((f) => join(ROOT, "test", "fixtures", f)),
  ...["expandable.ring", "lapped.ring", "names.ring"].map((f) => join(ROOT, "test", "profiler", "fixtures", "rings", f)),
];

/** A ring's records, read once (into a batch of room for 2 M, 120 MB to zero) and kept at their
 *  count; each test gets a copy of its own (one test stamps lines on its copy). */
function records(path: string, fold: boolean): EventBatch {
  const key = `${fold} ${path}`;
  let read = readOnce.get(key);
  if (!read) {
    const bytes = readFileSync(path);
    const ring = openRingBuffer(path.endsWith(".gz") ? Bun.gunzipSync(bytes) : bytes, path, { fold });
    const all = newEventBatch(1 << 21);
    ring.read(all);
    ring.close();
    readOnce.set(key, (read = copy(all)));
  }
  return copy(read);
}
const readOnce = new Map<string, EventBatch>();

function copy(all: EventBatch): EventBatch {
  const out = newEventBatch(all.count);
  for (const k of Object.keys(all) as (keyof EventBatch)[]) {
    const col = all[k];
    if (typeof col !== "number") (out[k] as Float64Array).set((col as Float64Array).subarray(0, all.count));
  }
  out.count = all.count;
  return out;
}

/** `all` without its marks: the records' own stamps then change inside runs of allocator records
 *  (as when the marks' writer lags the allocator's), which a run must stop at. */
function withoutMarks(all: EventBatch): EventBatch {
  const out = newEventBatch(all.count);
  let n = 0;
  for (let i = 0; i < all.count; i++) {
    if (isMark(all.action[i]!)) continue;
    for (const k of Object.keys(all) as (keyof EventBatch)[]) {
      const col = all[k];
      if (typeof col !== "number") (out[k] as Float64Array)[n] = (col as Float64Array)[i]!;
    }
    n++;
  }
  out.count = n;
  return out;
}

/** `all` with every third allocator record stamped with one of four profiler lines (the committed
 *  rings were recorded without the line profiler): a run stops after each, and the line's row takes
 *  the totals after its record. */
function withLines(all: EventBatch): EventBatch {
  let k = 0;
  for (let i = 0; i < all.count; i++) {
    const a = all.action[i]!;
    if (a <= ACTION.free_completed || a === ACTION.free) all.line[i] = k++ % 3 === 0 ? 1 + (k % 4) : 0;
  }
  return all;
}

/** Feed `all` in batches of `n` records. */
function fed(all: EventBatch, n: number): ProfilerModel {
  const model = createModel();
  for (let s = 0; s < all.count; s += n) model.ingest(all, 0, s, Math.min(all.count, s + n));
  return model;
}

/** The block table's sums, recomputed from its live blocks. */
function recomputed(d: DeviceState) {
  const b = d.blocks;
  const bytes = new Float64Array(N_CAT);
  const count = new Float64Array(N_CAT);
  const byRange = new Map<number, number>();
  let large = 0;
  for (const slot of b.bySlot.values()) {
    bytes[b.category[slot]!]! += b.size[slot]!;
    count[b.category[slot]!]!++;
    byRange.set(b.range[slot]!, (byRange.get(b.range[slot]!) ?? 0) + b.size[slot]!);
    if (b.size[slot]! > LARGE) large++;
  }
  return { bytes: [...bytes], count: [...count], byRange, large };
}

function kept(d: DeviceState) {
  const byRange = new Map<number, number>();
  d.blocks.bytesByRange.forEach((v, r) => v !== 0 && byRange.set(r, v));
  return { bytes: [...d.blocks.bytesByCat], count: [...d.blocks.countByCat], byRange, large: d.blocks.large };
}

/** What a device ends with, as plain numbers. */
function end(d: DeviceState) {
  return {
    totals: [d.allocated, d.requested, d.active, d.reserved, d.peakAllocated, d.peakActive, d.peakReserved, d.nAlloc, d.nFree],
    blocks: d.blocks.count,
    unknownFrees: [d.unknownFrees, d.unknownFreeBytes, d.replacedBlocks],
    lastTime: d.lastTime_us,
    // every bucket at every resolution: a run keeps its open finest bucket in locals (Timeline.extend)
    timeline: [0, 1e6, 6e7].map((r) => d.timeline.view(r).buckets),
    steps: d.steps.map((s) => [s.step, s.alloc_bytes, s.freed_bytes, s.n_alloc, s.n_free, s.peak_allocated, s.peak_time_us, s.largest_alloc_bytes, s.peakTemp, [...s.peakComp], [...s.phAlloc], [...s.phFreed], [...s.phFreedWithin], [...s.phPeak], [...s.liveByCatAtEnd], s.partial, [...s.ranges].map(([r, x]) => [r, { ...x }])]),
  };
}

describe("the allocator's records in runs", () => {
  for (const path of RINGS) {
    for (const fold of [true, false]) {
      const name = `${path.split("/").pop()}, frees ${fold ? "folded" : "as written"}`;
      test(`${name}: the timeline holds what observing the totals after every record gives`, () => {
        // The reference: a plain Timeline fed, record by record, the device's allocated and
        // reserved bytes after each record that moves them (the allocator's and the segments';
        // a free_completed, a mark, a sync or an OOM observes nothing), one Timeline.observe each.
        const all = records(path, fold);
        const model = createModel();
        const refs = new Map<number, Timeline>();
        const observes = new Set<number>([ACTION.alloc, ACTION.free_requested, ACTION.free, ACTION.segment_alloc, ACTION.segment_free, ACTION.segment_map, ACTION.segment_unmap]);
        for (let i = 0; i < all.count; i++) {
          model.ingest(all, 0, i, i + 1);
          const dev = all.device[i]!;
          const d = model.device(dev);
          if (!d || !observes.has(all.action[i]!)) continue;
          if (!refs.has(dev)) refs.set(dev, new Timeline());
          refs.get(dev)!.observe(all.time_us[i]!, d.allocated, d.reserved);
        }
        const big = fed(all, 65_536);
        expect(big.devices.length).toBeGreaterThan(0);
        for (const d of big.devices) for (const r of [0, 1e6, 6e7]) expect(d.timeline.view(r)).toEqual(refs.get(d.device)!.view(r));
      });
      test(`${name}: the running sums are the live blocks' sums`, () => {
        const model = fed(records(path, fold), 65_536);
        expect(model.devices.length).toBeGreaterThan(0);
        for (const d of model.devices) expect(kept(d)).toEqual(recomputed(d));
      });
      test(`${name}: every slot taken is a live block's or one the log of frees at the peak holds`, () => {
        // A logged free keeps its slot until no kept peak needs it (PeakWitness.retire); the log
        // gives it back when it drops the row, or the table would grow for good.
        for (const n of [65_536, 97]) {
          const model = fed(records(path, fold), n);
          for (const d of model.devices) expect(d.blocks.taken).toBe(d.blocks.count + d.peaks.held().rows);
        }
      });
      test(`${name}: one record at a time ends where big batches end`, () => {
        const all = records(path, fold);
        const big = fed(all, 65_536);
        const single = fed(all, 1);
        expect(single.eventsIngested).toBe(big.eventsIngested);
        expect(single.devices.map(end)).toEqual(big.devices.map(end));
      });
      test(`${name}, profiler lines stamped: each line's row is the same fed a record at a time or in big batches`, () => {
        const all = withLines(records(path, fold));
        const big = fed(all, 65_536);
        const single = fed(all, 1);
        const rows = (m: ProfilerModel) => m.lines.rows(new Map()).map((r) => ({ ...r }));
        expect(rows(big).length).toBe(4);
        expect(rows(single)).toEqual(rows(big));
        expect(single.devices.map(end)).toEqual(big.devices.map(end));
      });
      test(`${name}, marks taken out: one record at a time ends where big batches end`, () => {
        const all = withoutMarks(records(path, fold));
        const big = fed(all, 65_536);
        const single = fed(all, 1);
        expect(big.devices.flatMap((d) => d.steps).length).toBeGreaterThan(0);
        expect(single.devices.map(end)).toEqual(big.devices.map(end));
      });
    }
  }
});
