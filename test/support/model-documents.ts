// What the model answers about every committed ring, as one JSON-able object per ring: the
// replay's final line (summary, steps, breakdowns, categories, segments, findings), the process
// profile the documents carry, live blocks, the timeline, the blocks at the peaks, and the Timeline's
// step bands, taken at four points of the stream and at its end. Fed two ways: in the reader's big
// batches, and one record at a time (every run of allocator records one record long).
// test/profiler/model-documents.test.ts holds the model to these answers as a tree before the
// model's per-record loop was rewritten gave them: test/profiler/fixtures/model-documents/write.ts
// writes them with the profiler of any tree (`bun …/write.ts TREE`), so they come from code, not by hand.
// The tree's modules are passed in (`mods`), so one file serves this tree and an older one.
import { join } from "node:path";

export interface TreeModules {
  profiler: typeof import("../../src/profiler");
  recording: typeof import("../../src/collect/recording");
  events: typeof import("../../src/ffi/events");
  manifest: typeof import("../../src/system/manifest");
}

/** The rings: every committed recording a model is fed from (the exact rings with their seeds). */
export function ringPaths(root: string): Array<[string, string]> {
  const fix = join(root, "test", "fixtures");
  const rings = join(root, "test", "profiler", "fixtures", "rings");
  return [
    ...["normal.ring", "hf-gpt2.ring", "oom.ring", "kept-loss-graph.ring", "no-zero-grad.ring", "normal-history.ring", "hf-gpt2-leak.ring.gz", "compile-graphs.ring.gz"].map((f): [string, string] => [f.replace(/\.ring(\.gz)?$/, ""), join(fix, f)]),
    ...["gpt2", "resnet50", "expandable", "fsdp2", "compile", "attach-gpt2"].map((n): [string, string] => [`exact-${n}`, join(fix, "exact", `${n}.ring.gz`)]),
    ...["expandable", "lapped", "names"].map((n): [string, string] => [`rings-${n}`, join(rings, `${n}.ring`)]),
  ];
}

/** The answers at one moment. */
function answers(mods: TreeModules, m: InstanceType<TreeModules["profiler"]["ProfilerModel"]>): unknown {
  const p = mods.profiler;
  const out: Record<string, unknown> = { final: p.finalLine(m), profile: p.processProfile(m) };
  for (const d of m.devices) {
    const dev = d.device;
    const peaks: Record<string, unknown> = {};
    for (const which of ["step", "run", ...p.peakSteps(d)]) {
      peaks[String(which)] = p.atPeak(m, { device: dev, which: which as never, by: "name", limit: 20 });
      if (typeof which === "number") peaks[`${which} end`] = p.atPeak(m, { device: dev, which, by: "category", end: true });
    }
    const ts = p.timelineSteps(m, dev);
    out[`device ${dev}`] = {
      blocks: p.blocks(m, { device: dev, limit: 50 }),
      timeline: p.timeline(m, { device: dev, resolution_us: 0 }),
      peaks,
      bands: ts === null ? null : [...ts.steps, ts.running].map((s) => p.stepBands(m, { device: dev, step: s, columns: 120 })),
      unsized: d.unsizedBlocks,
      version: d.version,
    };
  }
  return JSON.parse(JSON.stringify(out));
}

/** The ring at `path` fed in its reader's batches (`one`: a record at a time): the answers at a
 *  quarter, half and three quarters of its records, and at its end. */
export function documentsOf(mods: TreeModules, path: string, one: boolean): unknown[] {
  const rec = mods.recording.openRingRecording(path);
  try {
    const m = mods.profiler.createModel().keepTrace();
    m.setRecordFields(mods.manifest.recordFields(rec.manifest));
    if (rec.seed) m.setSeed(rec.seed);
    const batches: { batch: ReturnType<TreeModules["events"]["newEventBatch"]>; lost: number }[] = [];
    let total = 0;
    for (;;) {
      const batch = mods.events.newEventBatch(65_536);
      const { count, lost } = rec.source.read(batch);
      batch.count = count;
      if (count === 0 && lost === 0) break;
      batches.push({ batch, lost });
      total += count;
    }
    const marks = [Math.floor(total / 4), Math.floor(total / 2), Math.floor((3 * total) / 4)];
    const out: unknown[] = [];
    let fed = 0;
    for (const { batch, lost } of batches) {
      if (lost > 0) m.ingest(batch, lost, 0, 0);
      let i = 0;
      while (i < batch.count) {
        // up to the next mark inside this batch, or its end: one call, or one a record
        const next = marks.find((k) => k > fed && k <= fed + batch.count - i);
        const end = next === undefined ? batch.count : i + (next - fed);
        if (one) for (let k = i; k < end; k++) m.ingest(batch, 0, k, k + 1);
        else m.ingest(batch, 0, i, end);
        fed += end - i;
        i = end;
        if (next !== undefined) out.push(answers(mods, m));
      }
    }
    out.push(answers(mods, m));
    return out;
  } finally {
    rec.close();
  }
}
