// The peak after an attach is torch's (issue 36: one peak, torch's max_memory_allocated()). The
// blocks hold what the allocator holds from the seed on, but torch's peak may have been reached
// before the agent came, in no block the records will ever show. The first sync point tied to its
// place in the stream (a SYNC whose count of events the records have exactly reached, and its
// SYNC_PEAKS, one reading of torch's statistics) gives it; the device's peaks rise from there with
// the blocks. The committed H200 attach (test/fixtures/exact/attach-gpt2) is held to torch at each
// of its 1,260 hooks by exact-rings.test.ts; these are the rule's edges.
import { describe, expect, test } from "bun:test";
import { createModel, parseSeed, summary, type ProfilerModel } from "../../src/profiler";
import { MiB, Trace } from "./trace";

const SEG = 0x7000_0000;
/** A seed: one 20 MiB segment holding one 4 MiB block, torch's state at the attach (no event before). */
const SEED = JSON.stringify({
  version: 1,
  unix_ns: 1_000_000_000,
  write_index: 0,
  devices: [{ device: 0, events: 0, segments: [{ address: SEG, total_size: 20 * MiB, stream: 0, is_expandable: false, segment_pool_id: [0, 0], blocks: [{ address: SEG, size: 4 * MiB, requested_size: 4 * MiB, state: "active_allocated" }] }] }],
});
const RESERVED = 20 * MiB;
const BEFORE = 64 * MiB; // torch's max_memory_allocated() at the attach: a step's peak from before it

/** The attach's sync (no SYNC_PEAKS: not a hook), a 2 MiB block, then a hook's sync point. */
function attached(peakAtHook: number, events = 1): Trace {
  const tr = new Trace();
  tr.sync(4 * MiB, RESERVED, 4 * MiB, 100);
  tr.alloc(SEG + 4 * MiB, 2 * MiB);
  tr.sync(6 * MiB, RESERVED, 6 * MiB, 100 + events).syncPeaks(peakAtHook, RESERVED, 6 * MiB);
  return tr;
}

function fed(tr: Trace, seed = true): ProfilerModel {
  const m = createModel();
  if (seed) m.setSeed(parseSeed(SEED));
  m.ingest(tr.batch());
  return m;
}

describe("the peak after an attach", () => {
  test("torch's from the first tied sync point on, and it rises from there with the blocks", () => {
    const tr = attached(BEFORE);
    const m = fed(tr);
    const d = m.devices[0]!;
    expect(d.peakAllocated).toBe(BEFORE);
    expect(d.blocksPeakAllocated).toBe(6 * MiB); // what the blocks reached since the attach
    // a later hook: the program passes its old peak; the blocks carry the peak on
    tr.alloc(SEG + 6 * MiB, 12 * MiB).alloc(SEG + 0x1000_0000, 60 * MiB);
    m.ingest(tr.batch(tr.rows.length - 2));
    expect(d.peakAllocated).toBe(78 * MiB);
    const s = summary(m).devices[0]!;
    expect(s.peak_allocated_bytes).toBe(78 * MiB);
    expect(s.peak_note).toBeNull(); // reached again since the attach: no second figure
  });

  test("a note only while the peak is one the blocks never reached since the attach", () => {
    const s = summary(fed(attached(BEFORE))).devices[0]!;
    expect(s.totals_source).toBe("blocks");
    expect(s.peak_allocated_bytes).toBe(BEFORE);
    expect(s.peak_note).toBe("torch's max_memory_allocated(), reached before the agent attached; 6.00 MiB since");
  });

  test("reserved's peak alike: torch's from before the attach where it is higher", () => {
    const tr = new Trace();
    tr.sync(4 * MiB, RESERVED, 4 * MiB, 100);
    tr.alloc(SEG + 4 * MiB, 2 * MiB);
    tr.sync(6 * MiB, RESERVED, 6 * MiB, 101).syncPeaks(BEFORE, 80 * MiB, 6 * MiB);
    const m = fed(tr);
    expect(m.devices[0]!.peakReserved).toBe(80 * MiB);
    expect(summary(m).devices[0]!.peak_reserved_bytes).toBe(80 * MiB);
  });

  test("taken once: every later sync point is a comparison, not a source", () => {
    const tr = attached(BEFORE);
    tr.alloc(SEG + 6 * MiB, 2 * MiB);
    // a figure the blocks cannot give (8 MiB are live): the model must not take it
    tr.sync(8 * MiB, RESERVED, 8 * MiB, 102).syncPeaks(BEFORE + 10 * MiB, RESERVED, 8 * MiB);
    expect(fed(tr).devices[0]!.peakAllocated).toBe(BEFORE);
  });

  test("a sync point the records had not reached (SYNC_UNSURE, or another count) gives nothing; the next tied one does", () => {
    const UNSURE = 2 ** 63;
    const tr = new Trace();
    tr.sync(4 * MiB, RESERVED, 4 * MiB, 100);
    tr.alloc(SEG + 4 * MiB, 2 * MiB);
    tr.sync(6 * MiB, RESERVED, 6 * MiB, UNSURE).syncPeaks(BEFORE + 1 * MiB, RESERVED, 6 * MiB);
    tr.sync(8 * MiB, RESERVED, 8 * MiB, 102).syncPeaks(BEFORE + 2 * MiB, RESERVED, 8 * MiB); // an event the records have not shown
    expect(fed(tr).devices[0]!.peakAllocated).toBe(6 * MiB);
    tr.alloc(SEG + 6 * MiB, 2 * MiB);
    tr.sync(8 * MiB, RESERVED, 8 * MiB, 102).syncPeaks(BEFORE, RESERVED, 8 * MiB);
    expect(fed(tr).devices[0]!.peakAllocated).toBe(BEFORE);
  });

  test("a seed that carries torch's peaks (read with the snapshot) gives them at once: no hook's sync point needed", () => {
    // a plain attach: the attach's sync, then allocator records only (no mark-every-hook mode)
    const tr = new Trace();
    tr.sync(4 * MiB, RESERVED, 4 * MiB, 100);
    tr.alloc(SEG + 4 * MiB, 2 * MiB);
    const seed = JSON.parse(SEED);
    Object.assign(seed.devices[0], { peak_allocated: BEFORE, peak_reserved: 80 * MiB });
    const m = createModel();
    m.setSeed(parseSeed(JSON.stringify(seed)));
    m.ingest(tr.batch());
    const d = m.devices[0]!;
    expect(d.peakAllocated).toBe(BEFORE);
    expect(d.peakReserved).toBe(80 * MiB);
    expect(d.blocksPeakAllocated).toBe(6 * MiB);
    expect(summary(m).devices[0]!.peak_note).toBe("torch's max_memory_allocated(), reached before the agent attached; 6.00 MiB since");
    // without them (an older agent's seed) the peak waits for a tied sync point
    expect(fed(tr).devices[0]!.peakAllocated).toBe(6 * MiB);
  });

  test("a seed's peaks must be counts: one clear line otherwise", () => {
    const seed = JSON.parse(SEED);
    seed.devices[0].peak_allocated = -1;
    expect(() => parseSeed(JSON.stringify(seed))).toThrow('the seed: devices[0]: "peak_allocated" must be a non-negative integer');
  });

  test("a run's device (no seed: its records start with its allocator) never takes torch's peak", () => {
    const tr = new Trace();
    tr.sync(0, 0, 0, 0);
    tr.segment(SEG, RESERVED).alloc(SEG, 4 * MiB);
    tr.sync(4 * MiB, RESERVED, 4 * MiB, 1).syncPeaks(BEFORE, RESERVED, 4 * MiB);
    expect(fed(tr, false).devices[0]!.peakAllocated).toBe(4 * MiB);
  });
});
