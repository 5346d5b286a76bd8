// What the Process chart draws under its curves: the training phase in each column of time, from
// the records the model keeps (model.keepTrace), so a glance tells forward from backward from the
// optimizer; and where the peak and the OOMs fall. Pure: model and a time window in, columns out.

import { ACTION, isMark } from "../ffi/events";
import type { ProfilerModel } from "./model";
import { N_PHASE } from "./steps";

/** Phase codes as in PHASE_NAMES (0 other, 1 forward, 2 backward, 3 optimizer); -1: no record in the column. */
export function phaseBands(m: ProfilerModel, device: number, fromUs: number, toUs: number, columns: number): Int8Array {
  const out = new Int8Array(columns).fill(-1);
  const t = m.tail;
  if (!t || columns <= 0) return out;
  const span = Math.max(1, toUs - fromUs);
  // Allocator records per column and phase; the phase with the most records names the column.
  const counts = new Uint32Array(columns * N_PHASE);
  for (let k = t.first; k < t.total; k++) {
    const s = t.slot(k);
    const phase = t.phase[s]!;
    if (isMark(t.action[s]!) || t.device[s] !== device || phase >= N_PHASE) continue;
    const time = t.time_us[s]!;
    if (time < fromUs || time > toUs) continue;
    const c = Math.min(columns - 1, Math.floor(((time - fromUs) / span) * columns));
    counts[c * N_PHASE + phase]! += t.action[s] === ACTION.free ? 2 : 1; // a folded pair is two records
  }
  for (let c = 0; c < columns; c++) {
    let best = -1;
    let n = 0;
    for (let p = 0; p < N_PHASE; p++) if (counts[c * N_PHASE + p]! > n) (n = counts[c * N_PHASE + p]!), (best = p);
    out[c] = best;
  }
  return out;
}

/** Columns of the window where OOMs happened (the device keeps its last incidents). */
export function oomColumns(m: ProfilerModel, device: number, fromUs: number, toUs: number, columns: number): number[] {
  const d = m.devices.find((x) => x.device === device);
  if (!d || columns <= 0) return [];
  const span = Math.max(1, toUs - fromUs);
  return d.ooms.filter((o) => o.time_us >= fromUs && o.time_us <= toUs).map((o) => Math.min(columns - 1, Math.floor(((o.time_us - fromUs) / span) * columns)));
}
