// Issue 37, attach: the blocks an attach's seed brings (from before the attach) take the frames
// torch recorded for them where its memory history was on; without, they say "before the attach"
// and no line. On the real 3-step training recorded with history (test/fixtures/normal-history:
// its ring, and torch's own snapshot at its end, whose blocks carry their frames), the seed made
// by the agent's own code (gpumem_agent.seed, through test/agent/attach_seed.py).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { withSeedStacks } from "../../src/collect/manifest-stacks";
import { blocks, createModel, parseSeed } from "../../src/profiler";
import { userFrameLabel } from "../../src/profiler/peak-groups";
import { frameLabel, userFrameIndex } from "../../src/profiler/user-frame";
import { readSnapshotFile } from "../../src/snapshot/read";
import { whereOf } from "../../src/tui/screens/tensor-table";
import { agentSeed, records } from "../support/seed-records";

const FIX = join(import.meta.dir, "..", "fixtures");

describe("normal-history attached at record 600: the seed's blocks and their lines", async () => {
  const all = records("normal-history.ring");
  const end = all.count - 1;
  // torch's own line of each block alive at the end, from the frames it recorded
  const snap = (await readSnapshotFile(join(FIX, "normal-history.pickle"))).root.segments as Array<{ blocks: Array<{ address: number; state: string; frames?: Array<{ filename: string; line: number; name: string }> }> }>;
  const torchLine = new Map<number, string | null>();
  for (const g of snap)
    for (const b of g.blocks) {
      if (b.state !== "active_allocated") continue;
      const frames = (b.frames ?? []).map((f) => ({ file: f.filename, line: f.line, name: f.name }));
      const k = userFrameIndex(frames);
      torchLine.set(b.address, k < 0 ? null : frameLabel(frames[k]!));
    }

  test("the seed carries torch's frames: each block from before the attach names torch's line for it", () => {
    const seed = agentSeed(600, 640);
    expect(Object.keys(seed.stacks ?? {}).length).toBeGreaterThan(0);
    const m = createModel();
    m.stacks = withSeedStacks(null, seed);
    m.setSeed(seed);
    m.ingest(all, 0, 600, end + 1);
    const before = blocks(m, { limit: Infinity }).blocks.filter((b) => b.category_source === "before_attach");
    expect(before.length).toBeGreaterThan(10);
    let named = 0;
    for (const b of before) {
      const ours = userFrameLabel(m, b.stack);
      expect(ours).toBe(torchLine.get(b.address) ?? null);
      if (ours) named++;
    }
    // the parameters and AdamW's state, made by the program's own lines
    expect(named).toBeGreaterThan(10);
    expect(whereOf(m.stacks!, 0)(before.find((b) => userFrameLabel(m, b.stack))!)).toMatch(/^scenarios\.py:\d+ /);
  });

  test("a seed without frames (history off): the blocks from before the attach say so, and have no line", () => {
    const seed = agentSeed(600, 640);
    for (const d of seed.devices) for (const g of d.segments) for (const b of g.blocks) delete b.stack;
    const m = createModel();
    // the hook's stacks on (a table of its own), none for the seed's blocks
    m.stacks = withSeedStacks(null, { ...seed, stacks: { "1": [["x.py", 1, "f"]] } });
    m.setSeed(seed);
    m.ingest(all, 0, 600, end + 1);
    const before = blocks(m, { limit: Infinity }).blocks.filter((b) => b.category_source === "before_attach");
    expect(before.length).toBeGreaterThan(10);
    const where = whereOf(m.stacks!, 0);
    for (const b of before) expect([b.stack, where(b)]).toEqual([0, "(before the attach)"]);
  });

  test("a seed's stacks are checked: a block naming a stack the seed does not have is said in one line", () => {
    const text = JSON.stringify({ version: 1, unix_ns: 0, devices: [{ device: 0, events: 0, segments: [{ address: 4096, total_size: 2 ** 21, blocks: [{ address: 4096, size: 512, state: "active_allocated", stack: 7 }] }] }], stacks: { "1": [["a.py", 3, "f"]] } });
    expect(() => parseSeed(text, "s.json")).toThrow("s.json: devices[0].segments[0].blocks[0]: its stack 7 is not one of the seed's stacks");
    expect(() => parseSeed(JSON.stringify({ version: 1, devices: [], stacks: { "1": [["a.py", "3", "f"]] } }), "s.json")).toThrow('s.json: stacks["1"] must be at most 256 frames [file, line, function]');
  });
});
