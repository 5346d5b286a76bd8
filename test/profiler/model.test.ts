// The model's rules on specific allocator sequences (see trace.ts). Recorded GPU rings test the
// same rules end to end in fixtures.test.ts.
import { describe, expect, test } from "bun:test";
import {
  blocks,
  breakdown,
  categories,
  createModel,
  findings,
  segments,
  steps,
  summary,
  timeline,
} from "../../src/profiler";
import { ringHeader } from "../support/ring-header";
import { BWD, FWD, MiB, OPT, OTHER, Trace, trainingStep } from "./trace";

function run(tr: Trace) {
  const m = createModel();
  m.ingest(tr.batch());
  return m;
}

function train(n: number, opts: { zeroGrad?: boolean; keep?: number } = {}) {
  const tr = new Trace();
  // parameters, loaded before training: two of the gradients' size, one larger
  tr.alloc(0x5000_0000, 4 * MiB).alloc(0x5040_0000, 4 * MiB).alloc(0x5080_0000, 8 * MiB);
  for (let s = 0; s < n; s++) trainingStep(tr, { ...opts, firstStep: s === 0 });
  return { tr, m: run(tr) };
}

describe("totals", () => {
  test("allocated, reserved, active, peaks and counts follow the events", () => {
    const tr = new Trace().segment(0x100000, 20 * MiB).alloc(0x100000, 4 * MiB).alloc(0x500000, 6 * MiB);
    tr.free(0x100000, 4 * MiB).alloc(0x900000, 1 * MiB);
    const d = summary(run(tr)).devices[0]!;
    expect(d.allocated_bytes).toBe(7 * MiB);
    expect(d.reserved_bytes).toBe(20 * MiB);
    expect(d.active_bytes).toBe(7 * MiB);
    expect(d.peak_allocated_bytes).toBe(10 * MiB);
    expect(d.n_alloc).toBe(3);
    expect(d.n_free).toBe(1);
    expect(d.n_segment_alloc).toBe(1);
    expect(d.reserved_unallocated_bytes).toBe(13 * MiB);
    expect(d.live_blocks).toBe(2);
    expect(d.partial).toBe(false);
    expect(d.totals_source).toBe("blocks");
  });

  test("a record for a device outside 0..15 is counted and skipped, the rest still counts", () => {
    const tr = new Trace().alloc(0x100, 1 * MiB);
    tr.device = 40;
    tr.alloc(0x100, 3 * MiB);
    tr.device = 0;
    tr.alloc(0x200000, 1 * MiB);
    const s = summary(run(tr));
    expect(s.invalid_records).toBe(1);
    expect(s.partial).toBe(true);
    expect(s.devices.map((d) => [d.device, d.allocated_bytes])).toEqual([[0, 2 * MiB]]);
  });

  test("a damaged range id does not make the model allocate for it", () => {
    const tr = new Trace().alloc(0x100000, 1 * MiB);
    tr.range = 0xfffffff0;
    tr.alloc(0x200000, 1 * MiB);
    const m = run(tr);
    expect(summary(m).invalid_records).toBe(1);
    expect(summary(m).devices[0]!.allocated_bytes).toBe(2 * MiB);
    expect(m.device(0)!.blocks.bytesByRange.length).toBeLessThan(1024);
  });

  test("devices are kept apart", () => {
    const tr = new Trace().alloc(0x100, 1 * MiB);
    tr.device = 1;
    tr.alloc(0x100, 3 * MiB);
    const s = summary(run(tr));
    expect(s.devices.map((d) => [d.device, d.allocated_bytes])).toEqual([
      [0, 1 * MiB],
      [1, 3 * MiB],
    ]);
  });

  test("the blocks' totals where every block is known, the header's counts; NVML used − reserved is the memory outside PyTorch", () => {
    const m = run(new Trace().segment(0x100000, 20 * MiB).alloc(0x100000, 4 * MiB));
    // the hook's running peak moves by requested sizes between the agent's copies: not torch's
    m.setHeader(ringHeader([{ allocated: 4 * MiB, reserved: 20 * MiB, peak_allocated: 9 * MiB, n_alloc: 7 }], { pid: 42 }));
    m.setNvml(42, 0, 600 * MiB, 2_000_000);
    const d = summary(m).devices[0]!;
    expect(summary(m).pid).toBe(42);
    expect(d.totals_source).toBe("blocks");
    expect(d.totals_cause).toBeNull();
    expect(d.peak_allocated_bytes).toBe(4 * MiB);
    expect(d.peak_note).toBeNull();
    expect(d.n_alloc).toBe(7);
    expect(d.non_pytorch_bytes).toBe(580 * MiB);
    expect(d.partial).toBe(false);
  });

  test("lost records: totals re-anchor on the header, block detail is marked partial", () => {
    const tr = new Trace().alloc(0x100000, 1 * MiB).alloc(0x200000, 1 * MiB).alloc(0x300000, 1 * MiB);
    const m = createModel();
    m.ingest(tr.batch(0, 1));
    // two records lapped: the reader reports them lost
    m.ingest(tr.batch(2, 3), 1);
    m.setHeader(ringHeader([{ allocated: 3 * MiB, reserved: 0, active: 3 * MiB }], { pid: 1 }));
    const d = summary(m).devices[0]!;
    expect(d.allocated_bytes).toBe(3 * MiB);
    expect(d.live_block_bytes).toBe(2 * MiB);
    // the live header runs ahead of the records: it is never compared with the blocks
    expect(d.unaccounted_bytes).toBeNull();
    expect(d.partial).toBe(true);
    expect(d.partial_causes).toEqual(["1 records lost (the ring lapped)"]);
    expect(blocks(m).partial).toBe(true);
    expect(findings(m).map((f) => f.id)).toContain("partial");
    // names from the agent fill the block back in
    const r = m.setNames([{ address: 0x200000, size: 1 * MiB, name: "layer.weight", category: "parameter", device: "cuda:0" }]);
    expect(r.added).toBe(1);
    expect(summary(m).devices[0]!.live_block_bytes).toBe(3 * MiB);
    expect(summary(m).devices[0]!.partial_causes[1]).toContain("1 blocks filled in by a resync");
    expect(blocks(m, { sort: "address" }).blocks[1]).toMatchObject({ name: "layer.weight", category: "parameter", category_source: "resync", step: null });
  });

  test("a free of a block never seen allocated keeps allocated exact and marks detail partial", () => {
    const m = run(new Trace().alloc(0x100, 2 * MiB).free(0x900, 1 * MiB));
    const d = summary(m).devices[0]!;
    expect(d.allocated_bytes).toBe(1 * MiB);
    expect(d.partial).toBe(true);
  });
});

describe("breakdown per step", () => {
  test("per-phase numbers add up to the step's totals", () => {
    const { m } = train(4);
    for (const step of [0, 1, 2]) {
      const b = breakdown(m, { step });
      const sum = (k: "alloc_bytes" | "freed_bytes" | "n_alloc") => b.phases.reduce((s, p) => s + p[k], 0);
      expect(sum("alloc_bytes")).toBe(b.alloc_bytes);
      expect(sum("freed_bytes")).toBe(b.freed_bytes);
      expect(sum("n_alloc")).toBe(b.n_alloc);
      expect(b.allocated_at_start_bytes + b.alloc_bytes - b.freed_bytes).toBe(b.held_at_end_bytes);
      expect(Math.max(...b.phases.map((p) => p.peak_allocated_bytes ?? 0))).toBe(b.peak.allocated_bytes);
      for (const p of b.phases) expect(p.held_at_end_bytes).toBe(p.alloc_bytes - p.temporary_bytes);
    }
  });

  test("the peak: where it is reached and what it is made of", () => {
    const { m } = train(4);
    const b = breakdown(m, { step: 2 });
    // params 16 + opt state 8 + batch 1 + activations 16 + gradient 4 = 45 MiB, reached in backward
    expect(b.peak.allocated_bytes).toBe(45 * MiB);
    expect(b.peak.phase).toBe("backward");
    expect(b.peak.by_category_bytes.activation).toBe(16 * MiB);
    expect(b.peak.by_category_bytes.parameter).toBe(16 * MiB);
    expect(b.peak.by_category_bytes.optimizer_state).toBe(8 * MiB);
    expect(b.peak.by_category_bytes.gradient).toBe(4 * MiB);
    expect(b.peak.by_category_bytes.other).toBe(1 * MiB);
    expect(b.peak.words).toBe("peak 45.00 MiB reached in backward of step 2: 36% parameter, 36% activation, 18% optimizer state");
    // the forward of this step holds 16 MiB at the peak, its gradient 4, the rest is older
    expect(b.phases[FWD]!.held_at_step_peak_bytes).toBe(16 * MiB);
    expect(b.phases[BWD]!.held_at_step_peak_bytes).toBe(4 * MiB);
    expect(b.peak.from_earlier_steps_bytes).toBe(24 * MiB);
    expect(b.phases[FWD]!.temporary_bytes).toBe(2 * MiB);
    expect(b.phases[BWD]!.temporary_bytes).toBe(3 * MiB);
    expect(b.phases[OPT]!.temporary_bytes).toBe(1 * MiB);
    expect(b.phases[FWD]!.held_at_end_bytes).toBe(16 * MiB);
  });

  test("a peak reached by temporaries counts them as temporaries once their phase ends", () => {
    const tr = new Trace();
    tr.setPhase(FWD).alloc(0x100, 10 * MiB).alloc(0x200, 30 * MiB).free(0x200, 30 * MiB).setPhase(BWD);
    tr.free(0x100, 10 * MiB).nextStep();
    const b = breakdown(run(tr), { step: 0 });
    expect(b.peak.allocated_bytes).toBe(40 * MiB);
    expect(b.peak.by_category_bytes.temporary).toBe(30 * MiB);
    expect(b.peak.by_category_bytes.activation).toBe(10 * MiB);
    expect(b.peak.phase).toBe("forward");
  });

  test("ranges: bytes allocated in them, their temporaries, their peak", () => {
    const { m } = train(3);
    m.setRanges({ "1": "encoder" });
    const r = breakdown(m, { step: 1 }).ranges.find((x) => x.name === "encoder")!;
    expect(r.alloc_bytes).toBe(10 * MiB);
    expect(r.temporary_bytes).toBe(2 * MiB);
    expect(r.held_at_end_bytes).toBe(8 * MiB);
    expect(r.entries).toBe(1);
    expect(() => breakdown(m, { step: 99 })).toThrow(/step 99 is not kept/);
  });

  test("steps() lists every kept step and the running one", () => {
    const { m } = train(3);
    const s = steps(m).steps;
    expect(s.map((x) => [x.step, x.complete])).toEqual([
      [0, true],
      [1, true],
      [2, true],
      [3, false],
    ]);
    expect(s[1]!.held_at_end_bytes).toBe(s[2]!.held_at_end_bytes);
  });
});

describe("categories of live memory", () => {
  test("lifetimes classify blocks the agent has not named", () => {
    const { m } = train(3);
    const c = Object.fromEntries(categories(m).categories.map((x) => [x.category, x.bytes]));
    expect(c.parameter).toBe(16 * MiB);
    expect(c.gradient).toBe(8 * MiB);
    expect(c.optimizer_state).toBe(8 * MiB);
    expect(c.activation).toBe(0);
  });

  test("the agent's names win over lifetimes, and name the blocks", () => {
    const { m } = train(3);
    m.setNames([{ address: 0x3000_0000 + 64, size: 1024, name: "state.exp_avg", category: "gradient", device: 0 }]);
    const b = blocks(m, { sort: "address" }).blocks.find((x) => x.address === 0x3000_0000)!;
    expect(b.name).toBe("state.exp_avg");
    expect(b.category).toBe("gradient");
    expect(b.category_source).toBe("names");
    expect(() => m.setNames([{ address: "x" } as never])).toThrow(/numeric address/);
  });

  test("blocks() are live blocks with where and when they were allocated", () => {
    const { m } = train(2);
    m.setRanges({ "1": "encoder" });
    const v = blocks(m, { limit: 2 });
    expect(v.total_blocks).toBe(6);
    expect(v.blocks.map((b) => b.size_bytes)).toEqual([8 * MiB, 8 * MiB]);
    expect(v.blocks[0]).toMatchObject({ step: 0, phase: "optimizer", category: "optimizer_state", stream: 7 });
    expect(v.blocks[1]).toMatchObject({ phase: "other", category: "parameter", step: 0 }); // known two steps in
  });
});

describe("detectors", () => {
  test("a forgotten zero_grad: gradients held across steps", () => {
    const { m } = train(6, { zeroGrad: false });
    const f = findings(m).find((x) => x.id === "gradients_kept");
    expect(f).toBeDefined();
    expect(f!.numbers.held_bytes).toBe(8 * MiB);
    expect(f!.numbers.held_blocks).toBe(2);
    expect(f!.evidence).toContain("zero_grad");
    expect(breakdown(m, { step: 3 }).gradient_held_from_earlier_steps_bytes).toBe(8 * MiB);
    // the same loop with zero_grad: nothing to say
    expect(findings(train(6).m).map((x) => x.id)).toEqual([]);
  });

  test("a small block that outlives the first backward (checkpointing's recompute) is not a kept gradient", () => {
    // As a transformers GPT-2 with gradient_checkpointing_enable() showed on an H200: one 1 MiB
    // block allocated in the first backward stays for the whole run, zero_grad frees the rest.
    const tr = new Trace();
    tr.alloc(0x5000_0000, 4 * MiB).alloc(0x5040_0000, 4 * MiB).alloc(0x5080_0000, 8 * MiB);
    for (let s = 0; s < 8; s++) {
      trainingStep(tr, { firstStep: s === 0 });
      if (s === 0) tr.setPhase(BWD).alloc(0x6000_0000, 1 * MiB).setPhase(OTHER);
    }
    const m = run(tr);
    expect(breakdown(m, { step: 4 }).gradient_held_from_earlier_steps_bytes).toBe(1 * MiB); // it is still held ...
    expect(findings(m).map((f) => f.id)).not.toContain("gradients_kept"); // ... but it is not the gradients
  });

  test("memory kept every step trips the growth detector, with the category that grows", () => {
    const { m } = train(10, { keep: 512 * 1024 });
    const f = findings(m).find((x) => x.id === "growth");
    expect(f).toBeDefined();
    expect(f!.numbers.growth_per_step_bytes).toBe(512 * 1024);
    expect(f!.numbers.category).toBe("activation");
    expect(f!.evidence).toContain("512.00 KiB per step");
    // few steps: not enough evidence yet
    expect(findings(train(4, { keep: 512 * 1024 }).m).find((x) => x.id === "growth")).toBeUndefined();
  });

  test("OOM incident: request, free, allocated, reserved, phase, range, step; reserved but unallocated memory that would have held it, in pieces", () => {
    const tr = new Trace();
    tr.segment(0x1000_0000, 100 * MiB);
    // 10 blocks of 10 MiB, every other one freed: 50 MiB free in 10 MiB holes
    for (let k = 0; k < 10; k++) tr.alloc(0x1000_0000 + k * 10 * MiB, 10 * MiB);
    for (let k = 0; k < 10; k += 2) tr.free(0x1000_0000 + k * 10 * MiB, 10 * MiB);
    tr.nextStep().setPhase(BWD).enter(3).oom(20 * MiB, 2 * MiB);
    const m = run(tr);
    m.setRanges({ "3": "attention" });
    const fs = findings(m);
    const oom = fs[0]!;
    expect(oom.id).toBe("oom");
    expect(oom.severity).toBe("error");
    expect(oom.numbers).toMatchObject({
      step: 1,
      phase: "backward",
      range: "attention",
      request_bytes: 20 * MiB,
      device_free_bytes: 2 * MiB,
      allocated_bytes: 50 * MiB,
      reserved_bytes: 100 * MiB,
      largest_free_block_bytes: 10 * MiB,
    });
    expect(oom.evidence).toContain("fragmentation");
    expect(oom.evidence).toContain("50.00 MiB reserved but unallocated");
    // The OOM is what the reserved but unallocated memory cost: that finding too, with the advice
    // that applies to pieces (not empty_cache(): the allocator empties its cache before an OOM).
    const cost = fs.find((x) => x.id === "reserved_unallocated")!;
    expect(cost.severity).toBe("warning");
    expect(cost.title).toBe("a request of 20.00 MiB failed with 50.00 MiB reserved but unallocated");
    expect(cost.numbers).toMatchObject({ inactive_splits: 5, inactive_split_bytes: 50 * MiB, releasable_bytes: 0, failed_request_bytes: 20 * MiB, private_pools_reserved_bytes: null });
    expect(cost.evidence).toContain("expandable_segments:True");
    expect(cost.evidence).toContain("max_split_size_mb");
    expect(cost.evidence).not.toContain("empty_cache");
    expect(fs.find((x) => x.id === "fragmentation")).toBeUndefined();
    expect(summary(m).devices[0]!.n_oom).toBe(1);
  });

  test("segments() map the blocks inside each segment and the holes between them", () => {
    const tr = new Trace().segment(0x1000, 8 * MiB).alloc(0x1000, 2 * MiB).alloc(0x1000 + 4 * MiB, 1 * MiB);
    tr.segment(0x4000_0000, 2 * MiB).segment(0x5000_0000, 2 * MiB).segmentFree(0x5000_0000, 2 * MiB);
    const s = segments(run(tr), { withBlocks: true });
    expect(s.segments.length).toBe(2);
    expect(s.segments[0]).toMatchObject({ allocated_bytes: 3 * MiB, free_bytes: 5 * MiB, largest_free_bytes: 3 * MiB, n_free_ranges: 2, n_blocks: 2 });
    expect(s.segments[0]!.blocks!.map((b) => b.size_bytes)).toEqual([2 * MiB, 1 * MiB]);
    expect(s.largest_free_bytes).toBe(3 * MiB);
    expect(s.reserved_bytes).toBe(10 * MiB);
    expect(segments(run(tr).device(0)!)).toEqual(segments(run(tr)));
  });
});

describe("timeline", () => {
  test("a one-event spike survives at every resolution", () => {
    const tr = new Trace();
    tr.dt = 1000;
    tr.alloc(0x100, 1 * MiB);
    for (let k = 0; k < 5000; k++) {
      tr.alloc(0x200, 1 * MiB).free(0x200, 1 * MiB);
      if (k === 2500) tr.alloc(0x300, 500 * MiB).free(0x300, 500 * MiB);
    }
    const m = run(tr);
    for (const res of [0, 1_000_000, 60_000_000]) {
      const v = timeline(m, { resolution_us: res });
      const max = Math.max(...v.buckets.map((b) => b.allocated_max_bytes));
      const min = Math.min(...v.buckets.map((b) => b.allocated_min_bytes));
      expect({ res, max, min }).toEqual({ res, max: 501 * MiB, min: 1 * MiB });
      expect(v.buckets.at(-1)!.allocated_last_bytes).toBe(1 * MiB);
    }
  });

  test("memory stays bounded: a day of events keeps at most each level's bucket count", () => {
    const tr = new Trace();
    const m = createModel();
    tr.dt = 50_000; // an event every 50 ms for a day
    for (let chunk = 0; chunk < 18; chunk++) {
      tr.rows = [];
      for (let k = 0; k < 50_000 / 2; k++) tr.alloc(0x100, 1 * MiB + (k % 7)).free(0x100, 1 * MiB + (k % 7));
      m.ingest(tr.batch());
    }
    const fine = timeline(m, { resolution_us: 0 });
    expect(fine.buckets.length).toBeLessThanOrEqual(6_001);
    const last = fine.buckets.at(-1)!.start_us;
    // buckets are kept where events fell: the finest level reaches back at least a minute
    expect(last - fine.buckets[0]!.start_us).toBeGreaterThanOrEqual(60_000_000);
    const minute = timeline(m, { resolution_us: 60_000_000 });
    expect(minute.resolution_us).toBe(60_000_000);
    expect(minute.buckets.length).toBeGreaterThan(700);
    expect(minute.buckets.length).toBeLessThanOrEqual(1_441);
  });

  test("NVML samples sit beside allocated and reserved", () => {
    const m = run(new Trace().alloc(0x100, 1 * MiB));
    m.setNvml(7, 0, 900 * MiB, 1_000_500);
    const b = timeline(m).buckets.at(-1)!;
    expect(b.nvml_used_max_bytes).toBe(900 * MiB);
    expect(b.allocated_max_bytes).toBe(1 * MiB);
  });
});

describe("records from concurrent writers", () => {
  test("a record stamped with the step before the last step mark does not reopen that step", () => {
    const tr = new Trace().alloc(0x100000, 1 * MiB).nextStep();
    tr.step = 0; // the allocator thread read the old step just before the mark landed
    tr.alloc(0x200000, 1 * MiB);
    tr.step = 1;
    tr.alloc(0x300000, 1 * MiB);
    const m = run(tr);
    expect(steps(m).steps.map((s) => [s.step, s.complete])).toEqual([
      [0, true],
      [1, false],
    ]);
    expect(breakdown(m, { step: 1 }).alloc_bytes).toBe(2 * MiB);
  });
});

describe("record_function ranges", () => {
  test("nested ranges: an exit record names the range left, the outer one is current again", () => {
    const tr = new Trace().enter(1).alloc(0x100000, 1 * MiB).enter(2).alloc(0x200000, 2 * MiB).exit();
    tr.alloc(0x300000, 4 * MiB).exit().alloc(0x400000, 8 * MiB);
    const m = run(tr);
    m.setRanges({ "1": "outer", "2": "inner" });
    const r = Object.fromEntries(breakdown(m, { step: 0 }).ranges.map((x) => [x.name, x]));
    expect(r.outer!.alloc_bytes).toBe(5 * MiB);
    expect(r.outer!.entries).toBe(2); // entered, and current again after inner
    expect(r.inner!.alloc_bytes).toBe(2 * MiB);
    expect(r.inner!.entries).toBe(1);
    expect(r.inner!.parent).toBe("outer");
    expect(r.outer!.parent).toBeNull();
    expect(r.outer!.inclusive_alloc_bytes).toBe(7 * MiB);
    expect(r.outer!.inclusive_peak_allocated_bytes).toBe(7 * MiB);
    expect(summary(m).devices[0]!.range).toBe(0);
  });
});

describe("lifetimes without names", () => {
  test("a block that outlives backward without a parameter of its size is no gradient (a workspace)", () => {
    const tr = new Trace();
    tr.alloc(0x5000_0000, 4 * MiB).alloc(0x5040_0000, 4 * MiB);
    for (let s = 0; s < 4; s++) {
      trainingStep(tr, { firstStep: s === 0 });
      if (s === 0) {
        // autograd's thread makes its cuBLAS workspace in the first backward and keeps it
        tr.setPhase(BWD).alloc(0x6000_0000, 32 * MiB).setPhase(0);
      }
    }
    const m = run(tr);
    const c = Object.fromEntries(categories(m).categories.map((x) => [x.category, x.bytes]));
    expect(c.gradient).toBe(8 * MiB);
    expect(c.other).toBe(32 * MiB);
    expect(findings(m).map((f) => f.id)).toEqual([]);
  });
});

describe("names from a scan", () => {
  test('a scanned tensor (category "other", name null) keeps the lifetime category', () => {
    const { m } = train(3);
    m.setNames([{ address: 0x3000_0000, size: 8 * MiB, name: null, category: "other", device: 0 }]);
    const b = blocks(m, { sort: "address" }).blocks.find((x) => x.address === 0x3000_0000)!;
    expect(b).toMatchObject({ category: "optimizer_state", category_source: "lifetime", name: null });
  });
});

describe("expandable segments", () => {
  test("pages mapped onto a range extend it; unmapping from the middle splits it", () => {
    const tr = new Trace();
    tr.rows.push([tr.t += 10, 5, 0, 0, 0x1000_0000, 2 * MiB, 7, 0, 0, 0]); // segment_map
    tr.rows.push([tr.t += 10, 5, 0, 0, 0x1020_0000, 4 * MiB, 7, 0, 0, 0]); // mapped right after
    tr.alloc(0x1000_0000, 1 * MiB);
    let s = segments(run(tr));
    expect(s.segments.map((x) => [x.address, x.size_bytes])).toEqual([[0x1000_0000, 6 * MiB]]);
    tr.rows.push([tr.t += 10, 6, 0, 0, 0x1020_0000, 2 * MiB, 7, 0, 0, 0]); // segment_unmap in the middle
    const m = run(tr);
    s = segments(m);
    expect(s.approximate).toBe(false);
    expect(s.segments.map((x) => [x.address, x.size_bytes])).toEqual([
      [0x1000_0000, 2 * MiB],
      [0x1040_0000, 2 * MiB],
    ]);
    expect(summary(m).devices[0]!.reserved_bytes).toBe(4 * MiB);
    expect(summary(m).devices[0]!.n_segment_alloc).toBe(0);
  });
});

describe("more lifetime rules", () => {
  test("what the loss keeps for backward (allocated outside modules, right before backward) is activation", () => {
    const tr = new Trace();
    tr.setPhase(FWD).alloc(0x100000, 4 * MiB).setPhase(0).alloc(0x600000, 2 * MiB).setPhase(BWD);
    const c = Object.fromEntries(categories(run(tr)).categories.map((x) => [x.category, x.bytes]));
    expect(c.activation).toBe(6 * MiB);
  });

  test("a polling-mode ring (header, no records): totals from the header, block detail said to be missing", () => {
    const m = createModel();
    m.setHeader(ringHeader([{ allocated: 3 * MiB, reserved: 8 * MiB }], { pid: 5, mode: "polling" }));
    const s = summary(m);
    expect(s.mode).toBe("polling");
    expect(s.devices[0]).toMatchObject({ allocated_bytes: 3 * MiB, reserved_bytes: 8 * MiB, live_blocks: 0, partial: true, totals_source: "hook" });
    expect(() => breakdown(m)).toThrow(/no events yet/);
  });
});

describe("a lost free", () => {
  test("an allocation at an address still held means its free was lost: the old block goes, detail is partial", () => {
    const tr = new Trace().alloc(0x100000, 4 * MiB).alloc(0x100000, 1 * MiB);
    const m = run(tr);
    const d = summary(m).devices[0]!;
    expect(d.allocated_bytes).toBe(1 * MiB);
    expect(d.live_blocks).toBe(1);
    expect(d.partial).toBe(true);
  });
});

describe("queries asked every frame", () => {
  test("segments() and blocks() reuse their sorting only while nothing changed", () => {
    const tr = new Trace().segment(0x1000, 8 * MiB).alloc(0x1000, 2 * MiB);
    const m = createModel();
    m.ingest(tr.batch());
    expect(segments(m).largest_free_bytes).toBe(6 * MiB);
    expect(blocks(m).blocks.length).toBe(1);
    const n = tr.rows.length;
    tr.alloc(0x1000 + 2 * MiB, 4 * MiB);
    m.ingest(tr.batch(n, tr.rows.length));
    expect(segments(m).largest_free_bytes).toBe(2 * MiB);
    expect(blocks(m).blocks.map((b) => b.size_bytes)).toEqual([4 * MiB, 2 * MiB]);
    m.setNames([{ address: 0x1000, size: 2 * MiB, name: "w", category: "parameter", device: 0 }]);
    expect(segments(m, { withBlocks: true }).segments[0]!.blocks![0]).toMatchObject({ name: "w", category: "parameter" });
  });
});

describe("bounded per-step detail", () => {
  test("old steps keep their phase figures but drop per-range detail; at most MAX_STEPS steps are kept", () => {
    const tr = new Trace();
    for (let s = 0; s < 600; s++) tr.enter(1).alloc(0x100000, 1 * MiB).free(0x100000, 1 * MiB).exit().nextStep();
    const m = run(tr);
    const kept = steps(m).steps;
    expect(kept.length).toBe(513); // 512 finished and the running one
    expect(kept[0]!.step).toBe(600 - 512);
    const old = breakdown(m, { step: 100 });
    expect(old.ranges_dropped).toBe(true);
    expect(old.alloc_bytes).toBe(1 * MiB);
    const recent = breakdown(m, { step: 590 });
    expect(recent.ranges_dropped).toBe(false);
    expect(recent.ranges[0]!.alloc_bytes).toBe(1 * MiB);
  });
});

describe("attached after the model was built", () => {
  test("no parameter seen before the first forward: backward survivors are still taken for gradients", () => {
    const tr = new Trace();
    for (let s = 0; s < 4; s++) trainingStep(tr, { zeroGrad: false, firstStep: s === 0 });
    const m = run(tr);
    expect(findings(m).find((f) => f.id === "gradients_kept")?.numbers.held_bytes).toBe(8 * MiB);
  });
});
