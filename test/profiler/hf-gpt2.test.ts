// A transformers GPT-2 (from a config) trained at full speed on an H200 under the agent, recorded
// with the agent's names taken mid-run (test/fixtures/hf-gpt2.*, cut to its first 38 steps by
// tools/ring-cut.ts; torch's own figures per step in hf-gpt2.facts.jsonl). Replayed as a user's
// screens would read it: names, ranges, no false alarm, the blocks equal to torch at every step.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch, PHASE } from "../../src/ffi/events";
import { blocks, breakdown, createModel, findings, replay, type ReplayFinalLine } from "../../src/profiler";

const DIR = join(import.meta.dir, "..", "fixtures");
const facts = readFileSync(join(DIR, "hf-gpt2.facts.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((f) => !f.final);
const torchAt = new Map<number, { memory_allocated: number; requested_bytes: number }>(facts.map((f) => [f.step, f]));

async function replayed() {
  const rec = openRingRecording(join(DIR, "hf-gpt2.ring"));
  const model = createModel();
  let final: ReplayFinalLine | null = null;
  try {
    for await (const line of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) if (line.type === "final") final = line;
  } finally {
    rec.close();
  }
  return { model, final: final!, rec };
}

describe("GPT-2 (transformers) recorded on an H200", () => {
  test("no record lost, never partial, every sync agrees: the blocks add up to torch's allocated at every step", async () => {
    const { final, rec } = await replayed();
    expect(rec.notes).toEqual([]);
    expect(final.lost_records).toBe(0);
    const d = final.summary.devices[0]!;
    expect(d.partial).toBe(false);
    expect(d.partial_causes).toEqual([]);
    expect(d.sync.disagreed).toBe(0);
    expect(d.sync.skipped).toBe(0);
    const done = final.devices[0]!.steps.filter((s) => s.complete);
    expect(done.length).toBe(38);
    expect(d.sync.checks).toBe(done.length + 1); // the attach, then one a step
    for (const s of done) {
      // model step k ends with the (k+1)-th optimizer step: torch's figure right after it
      const torch = torchAt.get(s.step + 1)!;
      expect({ step: s.step, torch: s.torch_allocated_at_end_bytes }).toEqual({ step: s.step, torch: torch.memory_allocated });
      // the blocks: torch's allocated less what large blocks hold beyond their requests (≤ 1 MiB each)
      expect(s.held_at_end_bytes).toBeLessThanOrEqual(torch.memory_allocated);
      expect(torch.memory_allocated - s.held_at_end_bytes).toBeLessThan(64 * 2 ** 20);
    }
    // what the run shows: cache reserved but unallocated between steps, said as info, no warning
    expect(final.findings.filter((f) => f.severity !== "info")).toEqual([]);
  });

  test("the Tensors screen's rows: parameters and AdamW state by name with shape and dtype, the rest in words", async () => {
    const { model } = await replayed();
    const rows = blocks(model, { limit: Infinity }).blocks;
    const byName = new Map(rows.filter((b) => b.name).map((b) => [b.name!, b]));
    expect(byName.get("transformer.wte.weight")).toMatchObject({ category: "parameter", shape: [50257, 512], dtype: "float32", name_source: "agent" });
    expect(byName.get("exp_avg of transformer.wte.weight")).toMatchObject({ category: "optimizer_state", shape: [50257, 512] });
    expect(byName.get("exp_avg_sq of transformer.h.0.attn.c_attn.weight")).toMatchObject({ category: "optimizer_state", shape: [512, 1536] });
    for (const b of rows) expect(b.label).not.toMatch(/^0x[0-9a-f]+$/);
    // gradients (None when these names were taken) are known by their lifetime, and said so
    const grads = rows.filter((b) => b.category === "gradient");
    expect(grads.length).toBeGreaterThan(0);
    for (const g of grads.filter((b) => !b.name)) expect(g.label).toMatch(/^\(gradient, backward, .*step \d+\)$/);
  });

  test("ranges by name, the user's and PyTorch's own, never by number", async () => {
    const { model } = await replayed();
    const b = breakdown(model, { step: 37 });
    const names = b.ranges.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(["train_step", "Optimizer.step#AdamW.step"]));
    for (const n of names) expect(n).not.toMatch(/^range#/);
  });
});

describe("names that come before the first forward (the agent injected by `run`, the model built before the first tick)", () => {
  test("a cache backward makes (autograd thread's cuBLAS workspace) is not taken for gradients kept", async () => {
    // Where the first forward begins in the recording.
    const scan = openRingRecording(join(DIR, "hf-gpt2.ring"));
    const b = newEventBatch(1 << 20);
    scan.source.read(b);
    scan.close();
    let firstForward = 0;
    while (!(b.action[firstForward] === ACTION.phase && b.phase[firstForward] === PHASE.forward)) firstForward++;
    const rec = openRingRecording(join(DIR, "hf-gpt2.ring"));
    // The parameters' names as the agent gives them once the model is built: the same tensors at
    // the same addresses, taken just before the first forward.
    const params = rec.names.flatMap((n) => n.tensors).filter((t) => t.category === "parameter");
    const model = createModel();
    let final: ReplayFinalLine | null = null;
    try {
      for await (const line of replay(rec.source, { ranges: rec.ranges, names: [{ tensors: params, write_index: firstForward }], model })) if (line.type === "final") final = line;
    } finally {
      rec.close();
    }
    expect(params.length).toBeGreaterThan(70);
    expect(final!.findings.filter((f) => f.severity !== "info")).toEqual([]);
    // what backward left alive that has no parameter's size is a cache, not a gradient
    const rows = blocks(model, { limit: Infinity }).blocks;
    const sizes = new Set(rows.filter((b) => b.category === "parameter").map((b) => b.size_bytes));
    for (const g of rows.filter((b) => b.category === "gradient")) expect(sizes.has(g.size_bytes)).toBe(true);
  });
});
