// Names on the Tensors screen's data: the agent's names with shape and dtype, carried to the same
// tensor made again in a later step, a label in words for what has no name, and a recording's saved
// names applied where they were taken.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { blocks, createModel, replay, type ReplayFinalLine } from "../../src/profiler";
import { MiB, Trace, trainingStep } from "./trace";

const OWN = join(import.meta.dir, "fixtures", "rings");

describe("names", () => {
  test("a gradient made again each step keeps its name, marked as carried from an earlier step", () => {
    const tr = new Trace();
    tr.alloc(0x5000_0000, 4 * MiB);
    trainingStep(tr, { firstStep: true });
    const m = createModel();
    m.ingest(tr.batch());
    m.setNames([
      { address: 0x2000_0000, size: 4 * MiB, name: "fc.weight.grad", category: "gradient", shape: [1024, 1024], dtype: "float32", device: 0 },
      { address: 0x5000_0000, size: 4 * MiB, name: "fc.weight", category: "parameter", shape: [1024, 1024], dtype: "float32", device: 0 },
    ]);
    const before = tr.rows.length;
    trainingStep(tr); // zero_grad frees the gradient, backward makes it again at the same address
    m.ingest(tr.batch(before));
    const byAddress = new Map(blocks(m, { limit: Infinity }).blocks.map((b) => [b.address, b]));
    expect(byAddress.get(0x2000_0000)).toMatchObject({ name: "fc.weight.grad", name_source: "earlier step", category: "gradient", shape: [1024, 1024], dtype: "float32" });
    expect(byAddress.get(0x5000_0000)).toMatchObject({ name: "fc.weight", name_source: "agent", label: "fc.weight" });
    // what has no name says what it is and where it came from
    const unnamed = [...byAddress.values()].filter((b) => b.name === null);
    expect(unnamed.length).toBeGreaterThan(0);
    for (const b of unnamed) expect(b.label).toMatch(/^\((activation|other|temporary|gradient|optimizer_state|parameter), .*step \d+\)$/);
  });

  test("a ring replayed with its saved names shows parameters and optimizer state by name, shape and dtype", async () => {
    const rec = openRingRecording(join(OWN, "names.ring"));
    expect(rec.names.length).toBe(1);
    expect(rec.notes).toEqual([]);
    let final: ReplayFinalLine | null = null;
    const model = createModel();
    try {
      for await (const line of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) if (line.type === "final") final = line;
    } finally {
      rec.close();
    }
    expect(final).not.toBeNull();
    const named = blocks(model, { limit: Infinity }).blocks.filter((b) => b.name !== null);
    expect(named.length).toBe(rec.names[0]!.tensors.length);
    const w = named.find((b) => b.name === "0.attn.in_proj_weight")!;
    expect(w).toMatchObject({ category: "parameter", shape: [768, 256], dtype: "float32" });
    expect(named.some((b) => /^exp_avg of /.test(b.name!))).toBe(true);
  });

  test("a ring without its manifest says so once, and still replays", async () => {
    const { mkdtempSync, copyFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "gpumem-names-"));
    copyFileSync(join(OWN, "names.ring"), join(dir, "bare.ring"));
    const rec = openRingRecording(join(dir, "bare.ring"));
    expect(rec.notes).toEqual([`${join(dir, "bare.ring")}: no manifest beside it (${join(dir, "bare.json")}): record_function ranges show by number`]);
    rec.close();
  });
});
