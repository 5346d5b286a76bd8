// The replay's peak against torch's max_memory_allocated(), on every snapshot recorded on a GPU
// (test/fixtures/normal-history.pickle and test/fixtures/snapshots/*.pickle.gz, each with torch's
// figures in its facts file). torch counts blocks, the trace carries requests: the replay counts
// the block the allocator handed out (block-sizes.ts), so where the whole run is in the recording
// its peak is torch's to the byte, and where a training step ran before the recording it can only
// be at or below torch's (that step's own peak predates the trace; every block from before counts
// from the start, so no moment of the replay holds more than the process did).
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { viewJson } from "../../src/snapshot/view";

const FIX = join(import.meta.dir, "..", "fixtures");
const FILES = [
  { name: "normal-history", path: join(FIX, "normal-history.pickle"), facts: join(FIX, "normal-history.facts.json") },
  ...readdirSync(join(FIX, "snapshots"))
    .filter((f) => f.endsWith(".pickle.gz"))
    .map((f) => f.replace(".pickle.gz", ""))
    .map((name) => ({ name, path: join(FIX, "snapshots", `${name}.pickle.gz`), facts: join(FIX, "snapshots", `${name}.facts.json`) })),
];

/** Training steps the run made before its recording began, from its facts: capture_snapshots.py
 *  writes it; normal-history's facts give the run's steps, of which the replay holds some or all. */
function stepsBefore(facts: Record<string, any>, stepsInReplay: number): number {
  if (typeof facts.steps_before_recording === "number") return facts.steps_before_recording;
  return facts.steps - stepsInReplay;
}

describe("the replay's peak is torch's max_memory_allocated", () => {
  test("every snapshot fixture is here", () => {
    // normal-history and twelve under snapshots/ (grads-kept and grads-zero-grad: issue 36's program recorded from its first line)
    expect(FILES.map((f) => f.name).sort()).toEqual(
      ["normal-history", "compile-graphs", "expandable", "first-line-keep-logits", "grads-kept", "grads-zero-grad", "leak", "midrun", "no-zero-grad", "oom", "resnet-no-zero-grad", "stacks-all", "stacks-python"].sort(),
    );
  });

  for (const f of FILES) {
    test(`${f.name}: allocated at the end and the peak, to the byte where the whole run was recorded`, async () => {
      const v = await viewJson(f.path);
      const facts = await Bun.file(f.facts).json();
      const r = v.replay.devices[0]!;
      expect(r.allocated_bytes).toBe(facts.memory_allocated);
      // every block's size known: none counted at a guess, no contradiction with the final segments
      expect(r.block_sizes).toMatchObject({ inferred: 0, disagreements: 0 });
      expect(r.block_sizes!.blocks).toBeGreaterThan(0);
      if (stepsBefore(facts, r.steps) === 0) expect(r.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      else expect(r.peak_allocated_bytes).toBeLessThanOrEqual(facts.max_memory_allocated);
    });
  }
});
