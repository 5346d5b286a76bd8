// An attach's seed (src/profiler/seed.ts; docs/protocol.md, "The seed") on real recordings: the
// agent's own code (gpumem_agent.seed.seed_device, through test/agent/attach_seed.py) ties a real
// snapshot to the stream; the model fed only the records after the attach then holds exactly what
// the allocator holds, is never partial, and agrees with torch at every step boundary.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ACTION } from "../../src/ffi/events";
import { blocks, createModel, summary, type ProfilerModel, type Seed } from "../../src/profiler";
import { readSnapshotFile } from "../../src/snapshot/read";
import { agentSeed, records } from "../support/seed-records";

const FIX = join(import.meta.dir, "..", "fixtures");

const live = (m: ProfilerModel) => new Map(blocks(m, { limit: Infinity }).blocks.map((b) => [b.address, b.size_bytes]));

describe("normal-history: a real snapshot tied to the stream by the agent", async () => {
  const all = records("normal-history.ring");
  const end = all.count - 1; // the last record is the snapshot's mark: the pickle is torch's state there
  const snap = (await readSnapshotFile(join(FIX, "normal-history.pickle"))).root.segments as Array<{ blocks: Array<{ address: number; size: number; state: string }> }>;
  const torchBlocks = new Map(snap.flatMap((g) => g.blocks.filter((b) => b.state === "active_allocated").map((b) => [b.address, b.size] as [number, number])));
  const torchAllocated = [...torchBlocks.values()].reduce((a, b) => a + b, 0);

  // attach → snapshot point: mid step 1; right after a segment_alloc (652) that the seed must leave
  // to its record; at the attach itself (nothing seen yet); a whole step later (step 2's records
  // seen before the seed, some frees of blocks from before the attach among them).
  for (const [attach, at] of [[600, 640], [600, 653], [546, 546], [700, 1100]] as const) {
    test(`attached at record ${attach}, snapshot at ${at}: the blocks are torch's, whole, from the attach on`, () => {
      const m = createModel();
      m.setSeed(agentSeed(attach, at));
      m.ingest(all, 0, attach, end + 1);
      expect(m.seedStatus).toMatchObject({ state: "applied", reason: null });
      expect(m.seedStatus!.blocks).toBeGreaterThan(10); // parameters and optimizer state from before
      const d = summary(m).devices[0]!;
      expect(d.partial_causes).toEqual([]);
      expect(d.before_attach_bytes).toBe(0);
      // exactly the allocator's blocks at the end: address and size, none missing, none extra
      expect(live(m)).toEqual(torchBlocks);
      expect(d.allocated_events_bytes).toBe(torchAllocated);
      expect(d.reserved_events_bytes).toBe(snap.reduce((a, g) => a + (g as unknown as { total_size: number }).total_size, 0));
    });
  }

  test("without the seed (the old way) the same records leave the detail partial: what the seed fixes", () => {
    const m = createModel();
    m.ingest(all, 0, 600, end + 1);
    const d = summary(m).devices[0]!;
    expect(d.partial).toBe(true);
    expect(live(m)).not.toEqual(torchBlocks);
  });

  test("blocks from before the attach: labelled so, named once the agent's names come", () => {
    const m = createModel();
    m.setSeed(agentSeed(600, 640));
    m.ingest(all, 0, 600, end + 1);
    const before = blocks(m, { limit: Infinity }).blocks.filter((b) => b.category_source === "before_attach");
    expect(before.length).toBeGreaterThan(0);
    expect(before[0]!.label).toBe("(other, allocated before the attach)");
    expect(before[0]!.step).toBeNull();
    const big = before[0]!;
    m.setNames([{ address: big.address, size: big.size_bytes, name: "model.wte.weight", category: "parameter", device: 0 }]);
    const named = blocks(m, { limit: Infinity }).blocks.find((b) => b.address === big.address)!;
    expect(named).toMatchObject({ name: "model.wte.weight", category: "parameter", category_source: "names" });
    expect(summary(m).devices[0]!.partial).toBe(false);
  });

  test("a seed the reader already passed, or after lost records, is refused with its reason, never applied at the wrong point", () => {
    const late = createModel();
    late.ingest(all, 0, 600, 700);
    late.setSeed(agentSeed(600, 640));
    expect(late.seedStatus).toMatchObject({ state: "refused", reason: "the reader had passed its point on device 0" });
    const lost = createModel();
    lost.setSeed(agentSeed(600, 640));
    lost.ingest(all, 3, 600, 610); // 3 records lost before these
    expect(lost.seedStatus).toMatchObject({ state: "refused", reason: "records were lost before its point" });
    expect(summary(lost).devices[0]!.partial).toBe(true);
  });
});

describe("hf-gpt2: seeded mid-run, every step boundary agrees with torch", () => {
  const all = records("hf-gpt2.ring");

  /** torch's state at record `at` (just after a counted record), from a model fed the whole ring
   *  up to there, with the requested sizes its records carried: what a snapshot would say. */
  function truthAt(at: number, attach: number): Seed {
    const m = createModel();
    m.ingest(all, 0, 0, at);
    const requested = new Map<number, number>();
    let events = 0;
    for (let i = 0; i < at; i++) {
      const a = all.action[i]!;
      if (a === ACTION.alloc) requested.set(all.address[i]!, all.size[i]!);
      if (a === ACTION.free_requested) requested.delete(all.address[i]!);
      if (i >= attach && (a === ACTION.alloc || a === ACTION.free_requested)) events++;
    }
    const d = m.devices[0]!;
    const segs = new Map<number, { address: number; total_size: number; stream: number; blocks: { address: number; size: number; requested_size: number; state: string }[] }>();
    for (const a of d.segments.addresses()) segs.set(a, { address: a, total_size: d.segments.size(a)!, stream: d.segments.stream(a), blocks: [] });
    const starts = [...segs.keys()].sort((a, b) => a - b);
    for (const b of blocks(m, { limit: Infinity }).blocks) {
      const seg = segs.get(starts.filter((a) => a <= b.address).pop()!)!;
      seg.blocks.push({ address: b.address, size: b.size_bytes, requested_size: requested.get(b.address)!, state: "active_allocated" });
    }
    return { version: 1, unix_ns: 0, devices: [{ device: 0, events, segments: [...segs.values()] }] };
  }

  test("attached at step 5, seeded in step 6: never partial, syncs all agree, names and steps from the next step", () => {
    const steps: number[] = [];
    for (let i = 0; i < all.count; i++) if (all.action[i] === ACTION.step) steps.push(i);
    const attach = steps[5]! + 3;
    let at = steps[6]! + 40;
    while (all.action[at - 1] !== ACTION.alloc && all.action[at - 1] !== ACTION.free_requested) at++;
    const m = createModel();
    m.setSeed(truthAt(at, attach));
    m.ingest(all, 0, attach, all.count);
    expect(m.seedStatus!.state).toBe("applied");
    const d = summary(m).devices[0]!;
    expect(d.partial_causes).toEqual([]);
    expect(d.sync.disagreed).toBe(0);
    expect(d.sync.checks).toBeGreaterThan(25);
    // the same run fed from its start: the same blocks at the end
    const whole = createModel();
    whole.ingest(all, 0, 0, all.count);
    expect(live(m)).toEqual(live(whole));
  });
});
