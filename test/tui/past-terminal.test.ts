// At the peak and back in time, in a real terminal (tmux, test/support/tmux.ts) at 80×24 and 200×60:
// a GPT-2 training recorded on an H200 replayed to its end. On Tensors, P shows the blocks alive at
// the running step's peak, then at the run's; `[` goes back to a finished step on every screen that
// can show it (Process: that step's table; Tensors and Segments: its end, P its peak), marked as
// the past; Esc
// comes back to now. The figures are the recording's own, read from a model replayed here.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { atPeak, breakdown, createModel, replay } from "../../src/profiler";
import { formatBytes } from "../../src/tui/format";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const RING = join(import.meta.dir, "..", "fixtures", "hf-gpt2.ring");
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 60_000) : test.skip(`${name} (${cannot})`, fn));

/** The recording played to its end once for both sizes (they only read it). */
let played: ReturnType<typeof replay1> | undefined;
const replayed = () => (played ??= replay1());
async function replay1() {
  const rec = openRingRecording(RING);
  const m = createModel();
  try {
    for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: m }));
  } finally {
    rec.close();
  }
  return m;
}

describe("at the peak and in the past, in a real terminal", () => {
  for (const [cols, rows] of [
    [80, 24],
    [200, 60],
  ] as const) {
    inTerminal(`${cols}×${rows}: P on Tensors, [ on Process and Tensors, Esc back to now`, async () => {
      const m = await replayed();
      const run = atPeak(m, { device: 0, which: "run" })!;
      const step37 = breakdown(m, { device: 0, step: 37 });
      const t = terminal(`past-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} replay ${q(RING)} --speed 50`, cols, rows);
      const fits = (text: string) => {
        for (const l of text.split("\n")) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
      };
      try {
        await t.until(/step 38 /, 20_000);
        t.keys("3");
        await t.until("Live memory by category");
        t.keys("P");
        const stepPeak = await t.until(/Alive at the running step's peak \(step 38\): [\d.]+ [GM]iB in \d+ blocks/);
        fits(stepPeak);
        t.keys("P");
        const runPeak = await t.until(/Alive at the run's peak/);
        fits(runPeak);
        // The heading's figure is the run's highest allocated, as the replayed model has it; the
        // largest rows are the forward's activations (a group of alike blocks) and named weights.
        expect(runPeak).toContain(`Alive at the run's peak (step ${run.step}): ${formatBytes(run.peak_bytes)}`);
        expect(runPeak).toMatch(/activation/);
        t.keys("P");
        await t.until("Live memory by category");
        // The past: the last finished step, on Process and on Tensors.
        t.keys("[");
        const tensorsPast = await t.until(/Alive at the end of step 37: [\d.]+ [GM]iB/);
        fits(tensorsPast);
        expect(tensorsPast.split("\n")[0]).toContain("PAST 37");
        expect(tensorsPast).toContain(`Alive at the end of step 37: ${formatBytes(step37.held_at_end_bytes)}`);
        t.keys("P");
        await t.until(/Alive at step 37's peak: [\d.]+ [GM]iB/);
        t.keys("2");
        const processPast = await t.until(/PAST Step 37: peak/);
        fits(processPast);
        expect(processPast).toContain(`PAST Step 37: peak ${formatBytes(step37.peak.allocated_bytes)}`);
        t.keys("[");
        await t.until(/PAST Step 36: peak/);
        t.keys("]", "]");
        // Now: the last complete step's table, unmarked.
        const now = await t.until(/^Step 37: peak/m);
        expect(now.split("\n")[0]).not.toContain("PAST");
        // Segments at step 37's peak (P chose the peak on Tensors: one choice for both screens), then
        // at its end: the blocks then, in the segments of then.
        const rec37 = m.device(0)!.steps.find((r) => r.step === 37)!;
        t.keys("[", "4");
        const segs = await t.until(/At step 37's peak: \d+ segments/);
        fits(segs);
        expect(segs).toContain(`reserved ${formatBytes(rec37.reserved_at_peak)}, allocated ${formatBytes(step37.peak.allocated_bytes)}`);
        t.keys("P");
        const segsEnd = await t.until(/At the end of step 37: \d+ segments/);
        expect(segsEnd).toContain(`reserved ${formatBytes(rec37.reserved_at_end)}, allocated ${formatBytes(step37.held_at_end_bytes)}`);
        // A screen that shows only now says so.
        t.keys("6");
        await t.until(/this screen shows now/);
        t.keys("Escape");
        await t.until(/\? help/);
        t.keys("q");
        await t.until("exit status 0");
      } finally {
        t.close();
      }
    });
  }
});
