// The phase strip's durations (profiler/phase-shares.ts): narrow columns walk only the kept records
// from a second before the window, held here to the walk over every kept record; wide ones (a tenth
// of a second or more) read the device's phase instances, held to the step breakdown's phase
// durations (the same moments) and near the walk (the marks' moments differ from the records'),
// and they reach back before the kept records. On
// recordings made on H100 and H200 GPUs, for windows at the trace's start, middle and end, wider and
// narrower than it.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay, type ProfilerModel } from "../../src/profiler";
import { phaseShares } from "../../src/profiler/phase-shares";
import { N_PHASE } from "../../src/profiler/steps";
import { PHASE_INSTANCES_MAX, PhaseHistory } from "../../src/profiler/phase-history";

const DIR = join(import.meta.dir, "..", "fixtures");
/** Columns this wide or wider are read from the phase instances (phase-shares.ts). */
const WIDE_US = 100_000;
/** The instances begin and end at the stamp changes (the process's phase marks among them), the
 *  walk at the device's records: on these recordings up to 7.3% of a column apart. */
const NEAR = 0.08;
const FIXTURES = ["hf-gpt2.ring", "normal.ring", "kept-loss-graph.ring", "lines/leak.ring.gz", "forecast/gpt2-leak.ring.gz"];

async function model(file: string, traceEntries?: number): Promise<ProfilerModel> {
  const rec = openRingRecording(join(DIR, file));
  const m = createModel().keepTrace(traceEntries);
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: m })) {
    // to the end
  }
  rec.close();
  return m;
}

/** The same durations from every kept record of the device: each record's phase lasts until the
 *  next record that is not behind it in time, cut to the window's columns. */
function everyRecord(m: ProfilerModel, device: number, fromUs: number, toUs: number, columns: number, sinceUs = -Infinity): Float64Array {
  const out = new Float64Array(columns * N_PHASE);
  const t = m.tail!;
  const width = (toUs - fromUs) / columns;
  let at = Number.NaN;
  let phase = -1;
  for (let k = t.first; k < t.total; k++) {
    const s = t.slot(k);
    if (t.device[s] !== device) continue;
    const time = t.time_us[s]!;
    if (time < sinceUs) continue;
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
        if ((to - from) / cols < WIDE_US) {
          const want = everyRecord(m, device, from, to, cols);
          expect(Array.from(got)).toEqual(Array.from(want));
          busy += want.reduce((a, b) => a + b, 0);
        } else {
          // the instances: from the device's first record (the model's begin)
          const want = everyRecord(m, device, from, to, cols, m.devices[0]!.firstTime_us);
          within(got, want, NEAR * ((to - from) / cols));
          busy += want.reduce((a, b) => a + b, 0);
        }
      }
      expect(busy).toBeGreaterThan(0);
    });
  }
});

/** Each column's time in each phase within `us` of the walk's. */
function within(got: Float64Array, want: Float64Array, us: number): void {
  expect(got.length).toBe(want.length);
  const off = Array.from(got).map((g, i) => Math.abs(g - want[i]!));
  expect(Math.max(...off)).toBeLessThanOrEqual(us);
}

describe("a strip reaches back past the kept records, wide columns and narrow", () => {
  for (const file of ["hf-gpt2.ring", "forecast/gpt2-leak.ring.gz"]) {
    test(file, async () => {
      // the screens keep 100,000 records (under a second of a busy training); here 2,000 of these
      const small = await model(file, 2_000);
      const whole = await model(file);
      const d = small.devices[0]!;
      const t = whole.tail!;
      const from = d.firstTime_us;
      const to = d.lastTime_us;
      const kept = small.tail!.time_us[small.tail!.slot(small.tail!.first)]!;
      expect(kept).toBeGreaterThan(from + (d.lastTime_us - from) / 2); // most of the run is not in the small trace
      const cols = Math.max(1, Math.floor((to - from) / WIDE_US));
      const got = phaseShares(small, d.device, from, to, cols);
      const want = everyRecord(whole, d.device, from, to, cols, from);
      within(got, want, NEAR * ((to - from) / cols));
      // the whole run in one column: each phase's time is the step breakdown's, to the microsecond
      const one = phaseShares(small, d.device, from, to, 1);
      const steps = [...d.steps, d.cur];
      for (let p = 0; p < N_PHASE; p++) {
        const breakdown = steps.reduce((a, r) => a + r.phDuration[p]!, 0) + (d.phase === p ? d.lastTime_us - d.phaseStart_us : 0);
        expect(Math.abs(one[p]! - breakdown)).toBeLessThan(1);
      }
      // and the columns before the small trace's first record are not empty
      const before = Math.floor((kept - from) / ((to - from) / cols));
      expect(got.slice(0, Math.max(1, before) * N_PHASE).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      expect(t.total).toBeGreaterThan(2_000);
      // a narrow window across the small trace's start: the instances before it, the records after
      const narrow = Math.max(1, Math.floor(200_000 / (WIDE_US / 2)));
      const [a, b] = [kept - 100_000, kept + 100_000];
      const part = phaseShares(small, d.device, a, b, narrow);
      within(part, everyRecord(whole, d.device, a, b, narrow, from), NEAR * (200_000 / narrow));
      expect(part.slice(0, (narrow / 2) * N_PHASE).reduce((x, y) => x + y, 0)).toBeGreaterThan(50_000);
    });
  }
});

/** The strip's own spread (phase-shares.ts), for a history read alone. */
function spreadInto(o: Float64Array, a: number, b: number, phase: number, from: number, width: number, columns: number): void {
  for (let c = Math.max(0, Math.floor((a - from) / width)); c < columns && from + c * width < b; c++) o[c * N_PHASE + phase]! += Math.min(b, from + (c + 1) * width) - Math.max(a, from + c * width);
}

describe("the phase instances stay in time order", () => {
  test("a full ring keeps the newest PHASE_INSTANCES_MAX: a window before them has nothing, one over them all of it", () => {
    const h = new PhaseHistory();
    const n = PHASE_INSTANCES_MAX + 1000;
    for (let i = 0; i < n; i++) h.add(i % N_PHASE, i * 10, i * 10 + 10);
    const gone = new Float64Array(N_PHASE);
    h.addShares(gone, 0, 1000 * 10, 1, spreadInto);
    expect(gone.reduce((a, b) => a + b, 0)).toBe(0);
    const held = new Float64Array(N_PHASE);
    h.addShares(held, 0, n * 10, 1, spreadInto);
    expect(held.reduce((a, b) => a + b, 0)).toBe(PHASE_INSTANCES_MAX * 10);
  });

  test("an instance that starts behind the last one's end starts at that end; one wholly behind is left out", () => {
    const h = new PhaseHistory();
    h.add(1, 0, 100);
    h.add(2, 90, 200); // threads' stamps: starts 10 µs early
    h.add(3, 150, 180); // wholly behind (a clock set back)
    h.add(0, 200, 300);
    const out = new Float64Array(3 * N_PHASE);
    h.addShares(out, 0, 300, 3, spreadInto);
    expect(Array.from(out)).toEqual([0, 100, 0, 0, 0, 0, 100, 0, 100, 0, 0, 0]);
  });
});
