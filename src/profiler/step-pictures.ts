// A finished step's pictures (its blocks at its peak and at its end, at-peak.ts) for the forecast's
// readings of that step: the gradients it made, what earlier steps left that it freed, the
// allocator's reserve (forecast.ts, forecast-reserve.ts). Each picture walks every live block and
// the log of frees; those readings are made together, once a step, the first time anyone asks
// (every tick of a busy process: a new step each time), and each asked for the same pictures: made
// once here. Read-only: the three readers share them.

import type { PeakPicture } from "./at-peak";
import type { DeviceState } from "./device";
import type { StepRecord } from "./steps";

interface Made {
  rec: StepRecord;
  /** The model's state they were made in: a block, a segment or a category changed (version), the
   *  phase (the running phase's blocks take their category from it) or a step ended (cur). */
  version: number;
  phase: number;
  cur: StepRecord;
  peak?: PeakPicture | null;
  end?: PeakPicture | null;
}

const made = new WeakMap<DeviceState, Made>();

/** Step `rec`'s picture at its peak, or at its end (`end`); null where the model keeps none. */
export function stepPicture(d: DeviceState, rec: StepRecord, end = false): PeakPicture | null {
  let m = made.get(d);
  if (!m || m.rec !== rec || m.version !== d.version || m.phase !== d.phase || m.cur !== d.cur) made.set(d, (m = { rec, version: d.version, phase: d.phase, cur: d.cur }));
  if (end) return m.end === undefined ? (m.end = d.peaks.picture(d.cur, rec.step, d.categoryCode, true)) : m.end;
  return m.peak === undefined ? (m.peak = d.peaks.picture(d.cur, rec.step, d.categoryCode)) : m.peak;
}
