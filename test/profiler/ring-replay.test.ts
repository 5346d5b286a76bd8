// Rings written by a real C producer through gpumem_ring.h (the writer half the hook uses: the same
// push and the same running totals), read by src/ffi's reader, replayed through the model.
import { expect, test } from "bun:test";
import { openRing } from "../../src/ffi/ring";
import { replay, type ReplayLine } from "../../src/profiler";
import { produce, tmpPath } from "../support/native";

async function replayRing(path: string): Promise<ReplayLine[]> {
  const r = openRing(path);
  try {
    const out: ReplayLine[] = [];
    for await (const line of replay(r, { batch_size: 4096 })) out.push(line);
    return out;
  } finally {
    r.close();
  }
}

test("a whole ring: the model's totals, summed from the records, equal the writer's running totals", async () => {
  const path = tmpPath("whole.ring");
  // two writer threads = two devices; an odd count leaves the last block of each allocated
  produce(path, 65536, 20001, 2);
  const final = (await replayRing(path)).at(-1)!;
  expect(final.type).toBe("final");
  expect(final.lost_records).toBe(0);
  expect(final.summary.devices.length).toBe(2);
  for (const d of final.summary.devices) {
    expect(d.totals_source).toBe("blocks"); // every record read: the blocks are the allocator's
    expect(d.allocated_events_bytes).toBe(d.allocated_bytes);
    expect(d.allocated_bytes).toBeGreaterThan(0);
    expect(d.live_block_bytes).toBe(d.allocated_bytes);
    expect(d.n_alloc).toBe(10001);
    expect(d.partial).toBe(false);
  }
  // the producer stamps a step every 100 blocks: 100 complete steps per device
  if (final.type === "final") expect(final.devices[0]!.steps.filter((s) => s.complete).length).toBe(100);
});

test("a lapped ring: records lost, totals still exact from the header, block detail partial", async () => {
  const path = tmpPath("lapped.ring");
  produce(path, 1024, 20001, 1);
  const final = (await replayRing(path)).at(-1)!;
  expect(final.lost_records).toBeGreaterThan(0);
  const d = final.summary.devices[0]!;
  expect(d.partial).toBe(true);
  expect(d.allocated_events_bytes).toBe(d.allocated_bytes); // re-anchored on the header
  expect(d.totals_source).toBe("hook");
  expect(d.totals_cause).toMatch(/records lost/);
  expect(final.type === "final" && final.findings.some((f) => f.id === "partial")).toBe(true);
});
