// How long each training phase lasted in each column of a chart's time window: the truth a phase
// strip tells. A column longer than a step holds several phases; counting its records (phaseBands)
// names the phase with the most of them (backward: a step's frees), which read as one backward
// lasting seconds. A window of columns a tenth of a second wide or more (the Process screen's chart,
// up to ten minutes) is read from the device's phase instances (phase-history.ts): they reach back
// past the kept records, and their times are the step breakdown's (a phase from the stamp change
// that began it to the one that ended it, the process's marks included). A narrower window (the
// Timeline screen's step) is read from the records the model keeps (model.keepTrace): a record's
// phase lasts until the device's next record; what of it lies before the kept records, from the
// instances. The two differ by the marks' moments, up to a few hundredths of a column. Pure: model
// and window in, microseconds per column and phase out.

import type { ProfilerModel } from "./model";
import { partitionPoint } from "./partition";
import { N_PHASE } from "./steps";

/** Columns at least this wide are read from the phase history: walking the kept records every
 *  frame cost more, and they cover too little of a wide window. */
const HISTORY_COLUMN_US = 100_000;

/** Per column, µs in each phase (column c, phase p at c * N_PHASE + p; 0 other, 1 forward,
 *  2 backward, 3 optimizer): from each record of the device to the next, in the phase the first
 *  one says. A column before the first record known (kept, or in the phase history), or after
 *  the last, has none: not known. */
export function phaseShares(m: ProfilerModel, device: number, fromUs: number, toUs: number, columns: number): Float64Array {
  const out = new Float64Array(Math.max(0, columns) * N_PHASE);
  if (columns <= 0 || !(toUs > fromUs)) return out;
  const width = (toUs - fromUs) / columns;
  const d = m.devices.find((x) => x.device === device);
  const t = m.tail;
  // where a narrow window's records begin (the device's first kept one): before it, only the phase
  // instances know; a wide window is theirs whole
  const kept = t && width < HISTORY_COLUMN_US ? firstKept(t, device) : Infinity;
  if (d && !(kept < toUs)) {
    d.phaseHistory.addShares(out, fromUs, toUs, columns, spread);
    // the running phase, from when it began to the device's last record (as the step's breakdown counts it)
    if (d.phase >= 0 && d.phase < N_PHASE) spread(out, Math.max(d.phaseStart_us, fromUs), Math.min(d.lastTime_us, toUs), d.phase, fromUs, width, columns);
    return out;
  }
  if (!t) return out;
  // a window that begins before the kept records: the instances up to them, the records after
  if (d && fromUs < kept) d.phaseHistory.addShares(out, fromUs, toUs, columns, (o, a, b, p, f, w, c) => spread(o, a, Math.min(b, kept), p, f, w, c));
  let prevTime = Number.NaN;
  let prevPhase = -1;
  for (let k = walkFrom(t, device, fromUs); k < t.total; k++) {
    const s = t.slot(k);
    if (t.device[s] !== device) continue;
    const time = t.time_us[s]!;
    if (prevPhase >= 0 && prevPhase < N_PHASE && time > prevTime) spread(out, Math.max(prevTime, fromUs), Math.min(time, toUs), prevPhase, fromUs, width, columns);
    if (time >= prevTime || prevTime !== prevTime) (prevTime = time), (prevPhase = t.phase[s]!);
    if (time >= toUs) break;
  }
  return out;
}

/** When the device's first kept record was (Infinity: none kept). */
function firstKept(t: NonNullable<ProfilerModel["tail"]>, device: number): number {
  for (let k = t.first; k < t.total; k++) if (t.device[t.slot(k)] === device) return t.time_us[t.slot(k)]!;
  return Infinity;
}

/** How far before the record that starts the window's first phase the walk starts (µs):
 *  threads' stamps are out of order by microseconds, and a second of records settles it. */
const LEAD_US = 1_000_000;

/** Where the walk starts: the records before the window only lead up to the phase at its start,
 *  which the device's last record before it says (the trace holds up to a minute of records, the
 *  window a few seconds). */
function walkFrom(t: NonNullable<ProfilerModel["tail"]>, device: number, fromUs: number): number {
  let k = firstAtOrAfter(t, fromUs) - 1;
  while (k >= t.first && t.device[t.slot(k)] !== device) k--;
  return k < t.first ? t.first : firstAtOrAfter(t, t.time_us[t.slot(k)]! - LEAD_US);
}

/** The first kept record at or after `us` (the trace's records are in time order but for threads'
 *  stamps a few microseconds apart; a binary search lands within those). */
function firstAtOrAfter(t: NonNullable<ProfilerModel["tail"]>, us: number): number {
  return partitionPoint(t.first, t.total, (k) => t.time_us[t.slot(k)]! < us);
}

/** Adds the time from `a` to `b` (within the window) to `phase` in the columns it crosses. */
function spread(out: Float64Array, a: number, b: number, phase: number, fromUs: number, width: number, columns: number): void {
  if (!(b > a)) return;
  const first = Math.max(0, Math.floor((a - fromUs) / width));
  const last = Math.min(columns - 1, Math.floor((b - fromUs) / width));
  for (let c = first; c <= last; c++) {
    const lo = Math.max(a, fromUs + c * width);
    const hi = Math.min(b, fromUs + (c + 1) * width);
    if (hi > lo) out[c * N_PHASE + phase]! += hi - lo;
  }
}
