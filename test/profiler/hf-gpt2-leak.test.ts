// A transformers GPT-2 that keeps every step's logits on the GPU, recorded on an H100 under the agent
// (test/fixtures/hf-gpt2-leak.*, see the fixtures' README). What a user reads of it: one growth
// finding with torch's own numbers, where the memory was allocated, and no other warning.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay, type ReplayFinalLine } from "../../src/profiler";

const DIR = join(import.meta.dir, "..", "fixtures");
const facts = readFileSync(join(DIR, "hf-gpt2-leak.facts.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((f) => !f.final);
const torchAt = new Map<number, { memory_allocated: number; requested_bytes: number }>(facts.map((f) => [f.step, f]));

async function replayed() {
  const rec = openRingRecording(join(DIR, "hf-gpt2-leak.ring.gz"));
  let final: ReplayFinalLine | null = null;
  try {
    for await (const line of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: createModel() })) if (line.type === "final") final = line;
  } finally {
    rec.close();
  }
  return { final: final!, rec };
}

describe("GPT-2 keeping each step's logits, recorded on an H100", () => {
  test("one growth finding, in torch's own numbers: requested bytes to the byte, memory_allocated() as torch read it", async () => {
    const { final, rec } = await replayed();
    expect(rec.notes).toEqual([]);
    expect(final.lost_records).toBe(0);
    expect(final.summary.devices[0]!.partial).toBe(false);
    const g = final.findings.find((f) => f.id === "growth")!;
    expect(g).toBeDefined();
    expect(g.severity).toBe("warning");
    // model step k ends with the (k+1)-th optimizer step: torch's figures right after it
    const first = torchAt.get(Number(g.numbers.first_step) + 1)!;
    const last = torchAt.get(Number(g.numbers.last_step) + 1)!;
    const steps = Number(g.numbers.last_step) - Number(g.numbers.first_step);
    expect(steps).toBeGreaterThanOrEqual(30);
    expect(g.numbers.held_from).toBe("torch");
    expect(g.numbers.first_held_bytes).toBe(first.memory_allocated);
    expect(g.numbers.last_held_bytes).toBe(last.memory_allocated);
    expect(g.numbers.growth_per_step_bytes).toBe(Math.round((last.memory_allocated - first.memory_allocated) / steps));
    // what the program keeps: 8 × 50,257 float32 logits a step, 1,608,224 bytes as torch counts requests
    expect(g.numbers.requested_growth_per_step_bytes).toBe(1_608_224);
    expect(g.numbers.growing_boundaries).toBe(g.numbers.boundaries);
    expect(g.title).toBe(`memory held at step boundaries grows by ${(Number(g.numbers.growth_per_step_bytes) / 2 ** 20).toFixed(2)} MiB per step`);
  });

  test("it says what grows and where it was made: kept outside every phase and range, a step at a time", async () => {
    const { final } = await replayed();
    const g = final.findings.find((f) => f.id === "growth")!;
    // The clone is taken after zero_grad, outside train_step: no phase, no range.
    expect(g.numbers.category).toBe("other");
    // one block a step, as torch counts it: the 1,608,224-byte request takes a whole 2 MiB free
    // block (the allocator splits a large block only where more than 1 MiB would remain)
    expect(g.numbers.category_growth_per_step_bytes).toBe(2_097_152);
    expect(g.numbers.site_phase).toBe("other");
    expect(g.numbers.site_range).toBeNull();
    expect(g.numbers.site_blocks).toBeGreaterThanOrEqual(Number(g.numbers.last_step) - Number(g.numbers.first_step));
    expect(g.evidence).toContain("outside forward, backward and the optimizer, outside every record_function range");
    expect(g.evidence).toContain("the program's requested bytes grew by 1.53 MiB per step");
    // and nothing else that would send a user looking for a problem that is not there
    expect(final.findings.filter((f) => f.severity !== "info").map((f) => f.id)).toEqual(["growth"]);
  });
});
