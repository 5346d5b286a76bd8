// The breakdown of a step: per phase and per record_function range, what was allocated during
// it, its temporaries, what it still held at its end, its peak, and its share of the step's peak,
// with the peak's composition in words. Pure queries over the model's step records.

import { PHASE_NAMES } from "../ffi/events";
import { CATEGORIES, CAT_UNRESOLVED, survivorCategory } from "./categories";
import type { DeviceState } from "./device";
import { formatBytes, formatShare, inPhaseOfStep } from "../words";
import type { ProfilerModel } from "./model";
import { num, requireDevice } from "./queries";
import { N_PHASE, type StepRecord } from "./steps";

export interface PhaseBreakdown {
  phase: string;
  /** Times the loop entered this phase during the step (gradient accumulation: more than one). */
  entries: number;
  alloc_bytes: number;
  freed_bytes: number;
  /** Allocated and freed within the phase: its temporaries. */
  temporary_bytes: number;
  /** Allocated during the phase and still held when it ended. */
  held_at_end_bytes: number;
  /** Highest allocated while in the phase (null if the step never entered it). */
  peak_allocated_bytes: number | null;
  /** Allocated when the phase last ended in this step. */
  allocated_at_end_bytes: number | null;
  duration_us: number;
  n_alloc: number;
  /** Bytes allocated during this phase of this step and alive at the step's peak. */
  held_at_step_peak_bytes: number;
  share_of_step_peak: number;
}

export interface RangeBreakdown {
  range: number;
  name: string | null;
  /** The range it runs inside (null at top level), and figures with the ranges inside it included. */
  parent: string | null;
  inclusive_alloc_bytes: number;
  inclusive_peak_allocated_bytes: number;
  /** The figures below count allocations while this range was the innermost one. */
  entries: number;
  alloc_bytes: number;
  freed_bytes: number;
  temporary_bytes: number;
  held_at_end_bytes: number;
  peak_allocated_bytes: number;
  n_alloc: number;
  held_at_step_peak_bytes: number;
  share_of_step_peak: number;
}

export interface StepBreakdown {
  device: number;
  step: number;
  /** False for the step still running. */
  complete: boolean;
  partial: boolean;
  start_us: number | null;
  end_us: number | null;
  duration_us: number | null;
  allocated_at_start_bytes: number;
  /** Allocated at the step's end (now, for the running step): what the step boundary holds. */
  held_at_end_bytes: number;
  reserved_at_end_bytes: number;
  alloc_bytes: number;
  freed_bytes: number;
  n_alloc: number;
  n_free: number;
  peak: {
    allocated_bytes: number;
    time_us: number | null;
    phase: string | null;
    range: number;
    range_name: string | null;
    by_category_bytes: Record<string, number>;
    share_by_category: Record<string, number>;
    /** Held at the peak but allocated in earlier steps (parameters, optimizer state, leaks…). */
    from_earlier_steps_bytes: number;
    words: string;
  };
  phases: PhaseBreakdown[];
  /** Empty with ranges_dropped for steps older than the last 64 (per-range detail is not kept). */
  ranges: RangeBreakdown[];
  ranges_dropped: boolean;
  /** Gradients from earlier steps still alive when this step's backward began (null: no backward). */
  gradient_held_from_earlier_steps_bytes: number | null;
  live_by_category_at_end_bytes: Record<string, number> | null;
}

function catRecord(comp: Float64Array, phaseForUnresolved: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let c = 0; c < CATEGORIES.length; c++) out[CATEGORIES[c]!] = comp[c]!;
  if (comp[CAT_UNRESOLVED]! !== 0) out[CATEGORIES[survivorCategory(phaseForUnresolved)]!]! += comp[CAT_UNRESOLVED]!;
  return out;
}

function stepBreakdown(m: ProfilerModel, d: DeviceState, r: StepRecord, complete: boolean): StepBreakdown {
  const comp = complete || r !== d.cur ? r.peakComp : d.provisionalPeakComp();
  const byCat = catRecord(comp, r.peak_phase < 0 ? 0 : r.peak_phase);
  const peak = r.peak_allocated;
  const share = (v: number) => (peak > 0 ? v / peak : 0);
  const shareByCat: Record<string, number> = {};
  for (const [k, v] of Object.entries(byCat)) shareByCat[k] = share(v);
  let fromStep = 0;
  for (let p = 0; p < N_PHASE; p++) fromStep += r.peakByPhase[p]!;
  const phases: PhaseBreakdown[] = [];
  for (let p = 0; p < N_PHASE; p++) {
    phases.push({
      phase: PHASE_NAMES[p]!,
      entries: r.phEntries[p]!,
      alloc_bytes: r.phAlloc[p]!,
      freed_bytes: r.phFreed[p]!,
      temporary_bytes: r.phFreedWithin[p]!,
      held_at_end_bytes: r.phAlloc[p]! - r.phFreedWithin[p]!,
      peak_allocated_bytes: r.phPeak[p]! >= 0 ? r.phPeak[p]! : null,
      allocated_at_end_bytes: num(r.phAllocatedAtEnd[p]!),
      duration_us: r.phDuration[p]! + (!complete && d.phase === p && r === d.cur ? d.lastTime_us - d.phaseStart_us : 0),
      n_alloc: r.phNAlloc[p]!,
      held_at_step_peak_bytes: r.peakByPhase[p]!,
      share_of_step_peak: share(r.peakByPhase[p]!),
    });
  }
  const ranges: RangeBreakdown[] = [];
  for (const [id, s] of r.ranges) {
    const atPeak = id < r.peakByRange.length ? r.peakByRange[id]! : 0;
    const parent = m.rangeParent.get(id) ?? 0;
    ranges.push({
      range: id,
      name: m.rangeName(id),
      parent: m.rangeName(parent),
      inclusive_alloc_bytes: s.alloc_bytes,
      inclusive_peak_allocated_bytes: s.peak_allocated_bytes,
      entries: s.entries,
      alloc_bytes: s.alloc_bytes,
      freed_bytes: s.freed_bytes,
      temporary_bytes: s.freed_within_bytes,
      held_at_end_bytes: s.alloc_bytes - s.freed_within_bytes,
      peak_allocated_bytes: s.peak_allocated_bytes,
      n_alloc: s.n_alloc,
      held_at_step_peak_bytes: atPeak,
      share_of_step_peak: share(atPeak),
    });
  }
  // Inclusive figures: each range's own, plus its descendants' (a range is added to every ancestor).
  const byId = new Map(ranges.map((x) => [x.range, x]));
  for (const x of ranges) {
    const seen = new Set<number>([x.range]);
    for (let p = m.rangeParent.get(x.range) ?? 0; p !== 0 && !seen.has(p); p = m.rangeParent.get(p) ?? 0) {
      seen.add(p);
      const anc = byId.get(p);
      if (!anc) continue;
      anc.inclusive_alloc_bytes += x.alloc_bytes;
      if (x.peak_allocated_bytes > anc.inclusive_peak_allocated_bytes) anc.inclusive_peak_allocated_bytes = x.peak_allocated_bytes;
    }
  }
  ranges.sort((a, b) => b.inclusive_peak_allocated_bytes - a.inclusive_peak_allocated_bytes || b.inclusive_alloc_bytes - a.inclusive_alloc_bytes);
  const peakPhase = r.peak_phase >= 0 ? (PHASE_NAMES[r.peak_phase] ?? null) : null;
  const peakRangeName = m.rangeName(r.peak_range);
  // The categories that make up the peak, largest first: those with at least a tenth of it (three at most).
  const parts = Object.entries(byCat)
    .filter(([, v]) => peak > 0 && v / peak >= 0.1)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([k, v]) => `${formatShare(share(v))} ${k.replace("_", " ")}`);
  const where = inPhaseOfStep(peakPhase, r.step);
  const words =
    `peak ${formatBytes(peak)} reached ${where}` + (peakRangeName ? ` (range ${peakRangeName})` : "") + (parts.length ? `: ${parts.join(", ")}` : "");
  const endAlloc = complete ? r.heldAtEnd : d.allocated;
  return {
    device: d.device,
    step: r.step,
    complete,
    partial: r.partial,
    start_us: num(r.start_us),
    end_us: complete ? num(r.end_us) : num(d.lastTime_us),
    duration_us: complete ? num(r.end_us - r.start_us) : num(d.lastTime_us - r.start_us),
    allocated_at_start_bytes: r.allocated_at_start,
    held_at_end_bytes: endAlloc,
    reserved_at_end_bytes: complete ? r.reserved_at_end : d.reserved,
    alloc_bytes: r.alloc_bytes,
    freed_bytes: r.freed_bytes,
    n_alloc: r.n_alloc,
    n_free: r.n_free,
    peak: {
      allocated_bytes: peak,
      time_us: num(r.peak_time_us),
      phase: peakPhase,
      range: r.peak_range,
      range_name: peakRangeName,
      by_category_bytes: byCat,
      share_by_category: shareByCat,
      from_earlier_steps_bytes: peak - fromStep,
      words,
    },
    phases,
    ranges,
    ranges_dropped: r.rangeDetailDropped,
    gradient_held_from_earlier_steps_bytes: num(r.gradHeldBytes),
    live_by_category_at_end_bytes: complete ? catRecord(r.liveByCatAtEnd, 0) : null,
  };
}

/**
 * The breakdown of one step per phase and per range. Without `step`: the last complete step (the
 * running one if none has completed). Throws for a step the model no longer keeps.
 */
export function breakdown(m: ProfilerModel, opts: { step?: number; device?: number } = {}): StepBreakdown {
  const d = requireDevice(m, opts.device);
  if (opts.step === undefined) {
    const last = d.steps[d.steps.length - 1];
    return last ? stepBreakdown(m, d, last, true) : stepBreakdown(m, d, d.cur, false);
  }
  if (opts.step === d.cur.step) return stepBreakdown(m, d, d.cur, false);
  for (let k = d.steps.length - 1; k >= 0; k--) if (d.steps[k]!.step === opts.step) return stepBreakdown(m, d, d.steps[k]!, true);
  const have = d.steps.length ? `${d.steps[0]!.step}..${d.cur.step}` : `${d.cur.step}`;
  throw new RangeError(`step ${opts.step} is not kept for device ${d.device} (steps kept: ${have})`);
}

export interface StepLine {
  step: number;
  complete: boolean;
  start_us: number | null;
  duration_us: number | null;
  allocated_at_start_bytes: number;
  held_at_end_bytes: number;
  /** torch's memory_allocated() at the step's boundary, from the hook's sync record there (null
   *  without one: none came, or blocks were allocated or freed between it and the boundary). */
  torch_allocated_at_end_bytes: number | null;
  peak_allocated_bytes: number;
  peak_phase: string | null;
  alloc_bytes: number;
  gradient_held_from_earlier_steps_bytes: number | null;
}

/** One line per kept step (oldest first), the running one last: for a step table or a sparkline. */
export function steps(m: ProfilerModel, opts: { device?: number } = {}): { device: number; steps: StepLine[] } {
  const d = requireDevice(m, opts.device);
  return { device: d.device, steps: [...d.steps.map((r) => stepLine(d, r, true)), stepLine(d, d.cur, false)] };
}

/** One step's line of `steps`: a finished step (`complete`) or the running one, d.cur. */
export function stepLine(d: DeviceState, r: StepRecord, complete: boolean): StepLine {
  return {
    step: r.step,
    complete,
    start_us: num(r.start_us),
    duration_us: complete ? num(r.end_us - r.start_us) : num(d.lastTime_us - r.start_us),
    allocated_at_start_bytes: r.allocated_at_start,
    held_at_end_bytes: complete ? r.heldAtEnd : d.allocated,
    torch_allocated_at_end_bytes: complete ? num(r.torchAtEnd) : null,
    peak_allocated_bytes: r.peak_allocated,
    peak_phase: r.peak_phase >= 0 ? (PHASE_NAMES[r.peak_phase] ?? null) : null,
    alloc_bytes: r.alloc_bytes,
    gradient_held_from_earlier_steps_bytes: num(r.gradHeldBytes),
  };
}
