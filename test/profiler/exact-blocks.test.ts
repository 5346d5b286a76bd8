// Every committed ring recorded on a GPU, replayed: each block has torch's size (the allocator's
// chain of blocks per large segment, profiler/large-pool.ts), so at every sync record the model's
// allocated is torch's memory_allocated() to the byte, its peak is max_memory_allocated(), and the
// step table's held-at-end is torch's figure at the step's boundary. Before the chains, the
// records' requests rounded fell short by up to 1 MiB a large block (hf-gpt2: 12 MiB at each of
// its 39 syncs; kept-loss-graph: 5 MiB at its end).
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { recordFields } from "../../src/system/manifest";
import { createModel, replay, steps, type ReplayFinalLine } from "../../src/profiler";
import { DeviceState } from "../../src/profiler/device";

const FIX = join(import.meta.dir, "..", "fixtures");
const MORE = join(import.meta.dir, "fixtures", "rings");
/** Every ring a GPU recorded that the repository holds (lapped.ring lost records: its own test below). */
const RINGS = [
  join(FIX, "hf-gpt2.ring"),
  join(FIX, "hf-gpt2-leak.ring.gz"),
  join(FIX, "compile-graphs.ring.gz"),
  join(FIX, "normal.ring"),
  join(FIX, "no-zero-grad.ring"),
  join(FIX, "kept-loss-graph.ring"),
  join(FIX, "oom.ring"),
  join(FIX, "normal-history.ring"),
  join(MORE, "expandable.ring"),
  join(MORE, "names.ring"),
];

interface AtSync {
  model: number;
  torch: number;
  step: number;
}

/** torch's figures at the end (`.facts.json`) or after each step (`.facts.jsonl`). */
function factsOf(ring: string): { end: { memory_allocated: number; max_memory_allocated: number } | null; perStep: Map<number, { memory_allocated: number; max_memory_allocated: number }> } {
  const base = ring.replace(/\.ring(\.gz)?$/, "");
  if (existsSync(`${base}.facts.json`)) return { end: JSON.parse(readFileSync(`${base}.facts.json`, "utf8")), perStep: new Map() };
  const lines = readFileSync(`${base}.facts.jsonl`, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  return { end: null, perStep: new Map(lines.filter((f) => !f.final).map((f) => [f.step, f])) };
}

/** The ring replayed as a user's replay reads it, with the model's allocated beside torch's at
 *  each sync record (DeviceState.syncPoint is where the model meets torch's figure). */
async function replayed(ring: string) {
  const at: AtSync[] = [];
  const original = DeviceState.prototype.syncPoint;
  DeviceState.prototype.syncPoint = function (this: DeviceState, t, allocated, reserved, requested, events) {
    const p = original.call(this, t, allocated, reserved, requested, events);
    if (p !== null) at.push({ model: this.allocated, torch: allocated, step: this.step });
    return p;
  };
  const rec = openRingRecording(ring);
  const model = createModel();
  let final: ReplayFinalLine | null = null;
  try {
    for await (const line of replay(rec.source, { ranges: rec.ranges, names: rec.names, model, ...recordFields(rec.manifest) })) if (line.type === "final") final = line;
  } finally {
    rec.close();
    DeviceState.prototype.syncPoint = original;
  }
  return { model, final: final!, at };
}

describe("every committed ring: the blocks are torch's", () => {
  for (const ring of RINGS) {
    const name = ring.slice(FIX.length - "fixtures".length);
    test(`${name}: allocated equals torch's at every sync record, the peak is torch's, the step table meets torch at each boundary`, async () => {
      const { model, final, at } = await replayed(ring);
      const facts = factsOf(ring);
      expect(final.lost_records).toBe(0);
      const s = final.summary.devices[0]!;
      expect(s.totals_source).toBe("blocks");
      expect(s.totals_cause).toBeNull();
      expect(model.devices[0]!.unsizedBlocks).toBe(0);
      // at every sync record: 0 bytes apart (the mid-run syncs, and the closed ring's end)
      expect(at.filter((x) => x.model !== x.torch)).toEqual([]);
      expect(s.sync.disagreed).toBe(0);
      expect(s.sync.last!.unaccounted_bytes).toBe(0);
      if (facts.end) {
        expect(s.allocated_bytes).toBe(facts.end.memory_allocated);
        expect(s.peak_allocated_bytes).toBe(facts.end.max_memory_allocated);
      }
      const lines = steps(model).steps.filter((x) => x.complete);
      for (const x of lines) if (x.torch_allocated_at_end_bytes !== null) expect({ step: x.step, held: x.held_at_end_bytes }).toEqual({ step: x.step, held: x.torch_allocated_at_end_bytes });
      if (facts.perStep.size > 0) {
        // torch's after optimizer step k + 1 is model step k's end; its max then is the run's so far
        for (const x of lines) expect({ step: x.step, held: x.held_at_end_bytes }).toEqual({ step: x.step, held: facts.perStep.get(x.step + 1)!.memory_allocated });
        const last = facts.perStep.get(Math.max(...lines.map((x) => x.step)) + 1)!;
        const peakByThen = Math.max(...lines.map((x) => x.peak_allocated_bytes));
        expect(peakByThen).toBe(last.max_memory_allocated);
        expect(s.peak_note).toBeNull();
      }
    });
  }

  test("a ring that lapped: the header's totals, said so with their cause; its peak is torch's, the records' beside it with why", async () => {
    const { final } = await replayed(join(MORE, "lapped.ring"));
    const s = final.summary.devices[0]!;
    const facts = JSON.parse(readFileSync(join(MORE, "lapped.facts.json"), "utf8"));
    expect(s.totals_source).toBe("hook");
    expect(s.totals_cause).toMatch(/^block detail partial: /);
    expect(s.allocated_bytes).toBe(facts.memory_allocated);
    expect(s.peak_allocated_bytes).toBe(facts.max_memory_allocated);
    expect(s.peak_note).toMatch(/^torch's max_memory_allocated\(\) as the agent last read it; the records reach /);
  });
});
