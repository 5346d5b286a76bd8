// A snapshot's stacks carried through its replay: each alloc of the trace brings its stack id into
// the model's blocks (exact at any moment of the replay, not only at the end), the blocks alive at
// a peak group by the user's line, and a snapshot the monitor writes from that model holds the
// frames again, read back the same. On real snapshots taken on an H100 (test/fixtures/snapshots).
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRecording } from "../../src/collect/recording";
import { atPeak, createModel, replayToEnd } from "../../src/profiler";
import { readSnapshotFile } from "../../src/snapshot/read";
import { summarize } from "../../src/snapshot/summary";
import { snapshotModel } from "../../src/snapshot/view";
import { writeSnapshotFile } from "../../src/snapshot/write";
import { DEFAULT_USER_FRAME_RULE, frameLabel, type BlockStacks } from "../../src/profiler/user-frame";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const WORK = mkdtempSync(join(tmpdir(), "stacks-through-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
const lineOf = (code: string) => SCRIPT.findIndex((l) => l.includes(code)) + 1;
/** The logits the leak run keeps each step: 4 × 64 × 1000 fp32. */
const LOGITS = 4 * 64 * 1000 * 4;
const frameLabelOf = (stacks: BlockStacks, stack: number) => stacks.frames(stack).map((f) => frameLabel(f));

describe("a snapshot's stacks through its replay", () => {
  test("leak: every block alive at the end has, from its alloc in the trace, the stack the final segments give it", async () => {
    const parsed = await readSnapshotFile(join(DIR, "leak.pickle.gz"));
    const { model } = snapshotModel(parsed);
    const d = model.devices[0]!;
    const stacks = model.stacks!;
    let fromTrace = 0;
    for (const s of d.blocks.bySlot.values()) {
      const mine = d.blocks.stack[s]!;
      const atEnd = stacks.stackOf(d.device, d.blocks.address[s]!);
      if (mine === 0) continue; // from before the recording: no alloc in the trace
      fromTrace++;
      expect({ address: d.blocks.address[s], frames: frameLabelOf(stacks, mine) }).toEqual({ address: d.blocks.address[s], frames: frameLabelOf(stacks, atEnd) });
    }
    expect(fromTrace).toBeGreaterThan(10);
  });

  test("leak: at the run's peak, grouped by the user's line, the forward's line holds the logits kept so far, and the groups add up to the peak", async () => {
    const parsed = await readSnapshotFile(join(DIR, "leak.pickle.gz"));
    const { model } = snapshotModel(parsed);
    const v = atPeak(model, { device: 0, which: "run", by: "frame", limit: Infinity })!;
    expect(v.groups.reduce((s, g) => s + g.bytes, 0) + v.unseen_bytes).toBe(v.peak_bytes);
    const forward = v.groups.find((g) => g.key.endsWith(`/capture_snapshots.py:${lineOf("out = model(input_ids=x, labels=x)")} step`))!;
    expect(forward).toBeDefined();
    // The forward's line made the activations alive at the peak, the kept logits among them.
    expect(forward.bytes).toBeGreaterThanOrEqual(LOGITS * (v.step - 1));
  });

  test("replay --snapshot of a snapshot: the written file's blocks carry the same user frames as the original's", async () => {
    const path = join(DIR, "leak.pickle.gz");
    const rec = await openRecording(path);
    const model = replayToEnd(rec.source, { ranges: rec.ranges, stacks: rec.stacks, segments: rec.segments, model: createModel().keepTrace() });
    const out = join(WORK, "leak-again.pickle");
    writeSnapshotFile(model, out);
    const want = summarize(await readSnapshotFile(path), 10, DEFAULT_USER_FRAME_RULE).top_allocations.map((t) => [t.address, t.size_bytes, t.user_frame]);
    const got = summarize(await readSnapshotFile(out), 10, DEFAULT_USER_FRAME_RULE).top_allocations.map((t) => [t.address, t.size_bytes, t.user_frame]);
    expect(got).toEqual(want);
    expect(got.filter(([, size, frame]) => size === LOGITS && String(frame).endsWith(`:${lineOf("out = model(input_ids=x, labels=x)")} step`)).length).toBeGreaterThanOrEqual(5);
  });
});
