// What was alive at a step's peak, on real recordings: the witness (a list of blocks freed since
// the peak, see at-peak.ts) against a slow, obvious oracle that copies every live block each time
// a step's peak rises, fed one record at a time. The groups add up to the peak to the byte.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, feed, FeedSource, replay } from "../../src/profiler";
import type { StepRecord } from "../../src/profiler/steps";
import { atPeak, PEAK_GROUPINGS, segmentsAt } from "../../src/profiler/peak-groups";
import { PEAK_STEPS_KEPT } from "../../src/profiler/at-peak";

const DIR = join(import.meta.dir, "..", "fixtures");

/** "address:size" of every live block of device 0, sorted. */
function liveSet(m: ReturnType<typeof createModel>): string[] {
  const b = m.device(0)!.blocks;
  return [...b.bySlot.values()].map((s) => `${b.address[s]}:${b.size[s]}`).sort();
}

describe("the blocks alive at a step's peak", () => {
  for (const name of ["normal.ring", "no-zero-grad.ring", "kept-loss-graph.ring", "oom.ring"]) {
    test(`${name}: each kept step's picture is the set the oracle copied at that peak; groups sum to the peak`, () => {
      const rec = openRingRecording(join(DIR, name));
      const m = createModel();
      const from = new FeedSource(rec.source, 1);
      const oracle = new Map<number, { peak: number; set: string[] }>();
      const ends = new Map<number, { allocated: number; set: string[] }>();
      let cur: StepRecord | null = null;
      let peak = -1;
      let before: string[] = [];
      try {
        for (;;) {
          const fed = feed(m, from, { records: 1 });
          const d = m.device(0);
          if (d) {
            if (d.cur !== cur) {
              // The record that began the step came after the last one's end: the set before it.
              if (cur) ends.set(cur.step, { allocated: cur.allocated_at_end, set: before });
              cur = d.cur;
              peak = cur.peak_allocated;
              oracle.set(cur.step, { peak, set: liveSet(m) });
            } else if (cur.peak_allocated > peak) {
              peak = cur.peak_allocated;
              oracle.set(cur.step, { peak, set: liveSet(m) });
            }
          }
          if (d) before = liveSet(m);
          if (fed.stop === "end") break;
        }
      } finally {
        rec.close();
      }
      const d = m.device(0)!;
      const kept = d.peaks.steps();
      expect(kept.length).toBeGreaterThan(1);
      let endsChecked = 0;
      for (const step of kept) {
        const pic = d.peaks.picture(d.cur, step, d.categoryCode)!;
        const want = oracle.get(pic.step)!;
        const got: string[] = [];
        for (let i = 0; i < pic.blocks.n; i++) got.push(`${pic.blocks.address[i]}:${pic.blocks.size[i]}`);
        expect({ step: pic.step, peak: pic.peak_bytes, set: got.sort() }).toEqual({ step: pic.step, peak: want.peak, set: want.set });
        // The step's end, against the set the oracle saw before the next step's first record.
        // (The run's highest step, once older than the kept ones, keeps its peak only.)
        const end = d.peaks.picture(d.cur, step, d.categoryCode, true);
        if (end === null) expect(step).toBe(kept[0]!);
        else {
          endsChecked++;
          const wantEnd = ends.get(step)!;
          const gotEnd: string[] = [];
          for (let i = 0; i < end.blocks.n; i++) gotEnd.push(`${end.blocks.address[i]}:${end.blocks.size[i]}`);
          expect({ step, bytes: end.peak_bytes, set: gotEnd.sort() }).toEqual({ step, bytes: wantEnd.allocated, set: wantEnd.set });
        }
        for (const by of PEAK_GROUPINGS) {
          const v = atPeak(m, { device: 0, which: pic.step, by, limit: Infinity })!;
          expect(v.groups.reduce((s, g) => s + g.bytes, 0) + v.unseen_bytes).toBe(v.peak_bytes);
          expect(v.unseen_bytes).toBe(0);
        }
      }
      expect(endsChecked).toBe(Math.min(kept.length, PEAK_STEPS_KEPT));
      // The segments at each kept step's end: its blocks placed in the segments of then, adding up
      // to allocated then; the segments shown and those released since make reserved then.
      for (const step of kept.slice(-PEAK_STEPS_KEPT)) {
        const rec = d.steps.find((r) => r.step === step)!;
        const map = segmentsAt(m, { device: 0, which: step, end: true, withBlocks: true })!;
        const inSegments = map.segments.reduce((s, x) => s + x.allocated_bytes, 0);
        expect({ step, placed: inSegments + map.unplaced_bytes }).toEqual({ step, placed: rec.allocated_at_end });
        expect(map.reserved_bytes).toBe(rec.reserved_at_end);
        expect(map.segments.reduce((s, x) => s + x.size_bytes, 0) + map.released_since_bytes).toBe(rec.reserved_at_end);
        for (const x of map.segments) expect(x.allocated_bytes).toBeLessThanOrEqual(x.size_bytes);
      }
      // The running step's picture too, against the oracle's last copy.
      const now = atPeak(m, { device: 0, which: "step", by: "category", limit: Infinity })!;
      expect(now.step).toBe(d.cur.step);
      expect(now.peak_bytes).toBe(oracle.get(d.cur.step)!.peak);
      expect(now.groups.reduce((s, g) => s + g.bytes, 0)).toBe(now.peak_bytes);
      // The run's peak is the device's highest allocated, and its blocks add up to it.
      const run = atPeak(m, { device: 0, which: "run", by: "category", limit: Infinity })!;
      expect(run.peak_bytes).toBe(d.peakAllocated);
      expect(run.groups.reduce((s, g) => s + g.bytes, 0)).toBe(d.peakAllocated);
    });
  }

  test("GPT-2 (transformers) on an H200: at the run's peak, the agent's names (given later in the run) name the parameters and AdamW state; the activations of the step's forward are the largest group", async () => {
    const rec = openRingRecording(join(DIR, "hf-gpt2.ring"));
    const m = createModel();
    try {
      for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: m }));
    } finally {
      rec.close();
    }
    const run = atPeak(m, { device: 0, which: "run", by: "name", limit: Infinity })!;
    expect(run.groups.reduce((s, g) => s + g.bytes, 0)).toBe(run.peak_bytes);
    expect(run.groups[0]).toMatchObject({ category: "activation" });
    expect(run.groups[0]!.key).toMatch(/^\(activation, forward, in train_step, step \d+\)$/);
    const names = new Map(run.groups.map((g) => [g.key, g]));
    expect(names.get("transformer.wte.weight")).toMatchObject({ category: "parameter", blocks: 1 });
    expect(names.get("exp_avg_sq of transformer.wte.weight")).toMatchObject({ category: "optimizer_state", blocks: 1 });
    // Each kept step's end, against torch's own memory_allocated right after that step's optimizer
    // step (hf-gpt2.facts.jsonl; model step k ends with the (k+1)-th): the blocks hold torch's figure
    // less what large blocks hold beyond their requests (under 1 MiB each).
    const facts = readFileSync(join(DIR, "hf-gpt2.facts.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((f) => !f.final);
    const torchAt = new Map<number, number>(facts.map((f) => [f.step, f.memory_allocated]));
    const d = m.device(0)!;
    let checked = 0;
    for (const step of d.peaks.steps()) {
      const end = atPeak(m, { device: 0, which: step, end: true, by: "category" });
      const torch = torchAt.get(step + 1);
      if (!end || torch === undefined) continue;
      checked++;
      // The recording's own sync record at that step's end says the same as torch's facts.
      expect(d.steps.find((r) => r.step === step)!.torchAllocated).toBe(torch);
      expect(end.groups.reduce((s, g) => s + g.bytes, 0)).toBe(end.peak_bytes);
      expect(torch - end.peak_bytes).toBeGreaterThanOrEqual(0);
      expect(torch - end.peak_bytes).toBeLessThan(64 * 2 ** 20);
    }
    expect(checked).toBe(PEAK_STEPS_KEPT);
    const byCat = atPeak(m, { device: 0, which: "run", by: "category" })!;
    expect(byCat.groups.map((g) => g.key)).toContain("optimizer_state");
    expect(atPeak(m, { device: 0, which: 12345 })).toBeNull();
  });
});
