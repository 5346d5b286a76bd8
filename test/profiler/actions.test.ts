// Every action cuda/gpumem_ring.h defines is one the model reads: adding an event type to the header
// (and so to src/ffi/wire.ts) without teaching the model fails here, as a record the model cannot
// place. A code no writer makes is counted as invalid, never taken for something it is not.
import { describe, expect, test } from "bun:test";
import { ACTION, ACTION_NAMES, isMark, newEventBatch, type EventBatch } from "../../src/ffi/events";
import { createModel, phaseBands, summary } from "../../src/profiler";

const MiB = 1024 * 1024;

/** One record of each code in `codes`, on device 0, a block's worth of fields each. */
function records(codes: number[]): EventBatch {
  const b = newEventBatch(codes.length + 1);
  // a segment first, so that block actions have somewhere to be
  b.action[0] = ACTION.segment_alloc;
  b.address[0] = 0x7000_0000;
  b.size[0] = 20 * MiB;
  codes.forEach((a, k) => {
    const i = k + 1;
    b.time_us[i] = 1000 + i;
    b.action[i] = a;
    b.address[i] = a === ACTION.sync ? 0 : 0x7000_0000 + (a === ACTION.segment_alloc ? 64 * MiB : 0);
    b.size[i] = a === ACTION.sync ? 0 : MiB;
    b.extra[i] = a === ACTION.sync ? 1 : 0;
  });
  b.count = codes.length + 1;
  return b;
}

describe("the header's actions in the model", () => {
  test("every action the header defines is read: none is counted invalid", () => {
    const codes = Object.keys(ACTION_NAMES).map(Number);
    expect(codes.length).toBe(Object.keys(ACTION).length);
    for (const a of codes) {
      const m = createModel();
      m.ingest(records([a]));
      expect({ action: ACTION_NAMES[a], invalid: summary(m).invalid_records }).toEqual({ action: ACTION_NAMES[a], invalid: 0 });
    }
  });

  test("codes no writer makes are counted invalid and change nothing; allocator records still count", () => {
    const unknown = [9, 14, 30, 255].filter((a) => !(a in ACTION_NAMES));
    expect(unknown).toEqual([9, 14, 30, 255]);
    const m = createModel();
    m.ingest(records([...unknown, ACTION.alloc]));
    const d = summary(m).devices[0]!;
    expect([summary(m).invalid_records, d.allocated_bytes, d.reserved_bytes, d.n_alloc]).toEqual([4, MiB, 20 * MiB, 1]);
  });

  test("marks are the codes from the header's FIRST_MARK on: the phase chart counts allocator records only", () => {
    expect(Object.values(ACTION).filter(isMark).map((a) => ACTION_NAMES[a])).toEqual(["phase", "step", "range_enter", "range_exit", "sync", "sync_peaks", "input", "limit"]);
    const m = createModel().keepTrace();
    const b = records([ACTION.alloc, ACTION.phase, ACTION.phase, ACTION.phase]);
    b.phase.fill(2, 2); // the marks say backward; the one allocator record was made in "other"
    m.ingest(b);
    expect([...phaseBands(m, 0, 0, 2000, 1)]).toEqual([0]);
  });
});
