// The phase strip's durations (profiler/phase-shares.ts) walk only the kept records from a second
// before the window: held here to the walk over every kept record, on recordings made on H100 and
// H200 GPUs, for windows at the trace's start, middle and end, wider and narrower than it.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay, type ProfilerModel } from "../../src/profiler";
import { phaseShares } from "../../src/profiler/phase-shares";
import { N_PHASE } from "../../src/profiler/steps";

const DIR = join(import.meta.dir, "..", "fixtures");
const FIXTURES = ["hf-gpt2.ring", "normal.ring", "kept-loss-graph.ring", "lines/leak.ring.gz", "forecast/gpt2-leak.ring.gz"];

async function model(file: string): Promise<ProfilerModel> {
  const rec = openRingRecording(join(DIR, file));
  const m = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: m })) {
    // to the end
  }
  rec.close();
  return m;
}

/** The same durations from every kept record of the device: each record's phase lasts until the
 *  next record that is not behind it in time, cut to the window's columns. */
function everyRecord(m: ProfilerModel, device: number, fromUs: number, toUs: number, columns: number): Float64Array {
  const out = new Float64Array(columns * N_PHASE);
  const t = m.tail!;
  const width = (toUs - fromUs) / columns;
  let at = Number.NaN;
  let phase = -1;
  for (let k = t.first; k < t.total; k++) {
    const s = t.slot(k);
    if (t.device[s] !== device) continue;
    const time = t.time_us[s]!;
    if (phase >= 0 && time > at) {
      for (let c = 0; c < columns; c++) {
        const lo = Math.max(at, fromUs + c * width);
        const hi = Math.min(time, fromUs + (c + 1) * width);
        if (hi > lo) out[c * N_PHASE + phase]! += hi - lo;
      }
    }
    if (time >= at || at !== at) (at = time), (phase = t.phase[s]!);
  }
  return out;
}

describe("phase shares from a second before the window", () => {
  for (const file of FIXTURES) {
    test(file, async () => {
      const m = await model(file);
      const t = m.tail!;
      const device = m.devices[0]!.device;
      const first = t.time_us[t.slot(t.first)]!;
      const last = t.time_us[t.slot(t.total - 1)]!;
      const span = last - first;
      expect(span).toBeGreaterThan(0);
      const windows: [number, number, number][] = [
        [first - 5e6, last + 5e6, 80], // wider than the trace
        [first, last, 120],
        [last - Math.min(span, 5e6), last, 100], // the screens' last seconds
        [first + span * 0.4, first + span * 0.6, 60], // the middle
        [first + span * 0.5, first + span * 0.5 + 20_000, 7], // 20 ms, inside a phase or two
        [first + span * 0.25, first + span * 0.9, 1],
      ];
      let busy = 0;
      for (const [from, to, cols] of windows) {
        const got = phaseShares(m, device, from, to, cols);
        const want = everyRecord(m, device, from, to, cols);
        expect(Array.from(got)).toEqual(Array.from(want));
        busy += want.reduce((a, b) => a + b, 0);
      }
      expect(busy).toBeGreaterThan(0);
    });
  }
});
