// A snapshot's resync makes block detail whole; what it filled in, freed later, must not count
// against a later resync's own blocks.
import { expect, test } from "bun:test";
import { createModel, resyncFromSnapshot, summary } from "../../src/profiler";
import { MiB, Trace } from "./trace";

test("blocks a snapshot filled in, freed later, leave no trace in the resync count", () => {
  const m = createModel();
  const tr = new Trace().segment(0x1000_0000, 8 * MiB).alloc(0x1000_0000, 1 * MiB);
  m.ingest(tr.batch());
  // the snapshot shows two more blocks the records never showed
  const seg = { device: 0, address: 0x1000_0000, total_size: 8 * MiB, stream: 0, blocks: [
    { address: 0x1000_0000, size: 1 * MiB, state: "active_allocated" },
    { address: 0x1010_0000, size: 2 * MiB, state: "active_allocated" },
    { address: 0x1030_0000, size: 2 * MiB, state: "active_allocated" },
  ] };
  resyncFromSnapshot(m, [seg as never], 1000);
  expect(summary(m).devices[0]!.partial_causes).toEqual([]);
  // both filled-in blocks are freed, then a lost stretch: names fill one block in again
  const after = new Trace().free(0x1010_0000, 2 * MiB).free(0x1030_0000, 2 * MiB);
  m.ingest(after.batch(), 1); // and a record lost before them
  expect(summary(m).devices[0]!.partial_causes.filter((c) => /resync/.test(c))).toEqual([]);
  // the agent's names then show a block the records never did: that one is filled in, and said so
  const r = m.setNames([{ address: 0x1050_0000, size: 1 * MiB, name: "layer.weight", category: "parameter", device: "cuda:0" }]);
  expect(r.added).toBe(1);
  const d = summary(m).devices[0]!;
  expect(d.partial_causes).toContain("1 blocks filled in by a resync (when and where they were allocated is unknown)");
  expect(d.live_blocks).toBe(2);
});
