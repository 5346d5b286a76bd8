// Pure queries over the model: what views show. Each returns a plain JSON-able object (bytes as
// integers, times in µs, null for "not available"); a number in the TUI and the same number in
// JSON come from one of these functions.

import { PHASES } from "../ffi/events";
import { CATEGORIES, CAT_UNRESOLVED, N_CAT, survivorCategory } from "./categories";
import { DeviceState, LARGE, RESYNCED_STEP } from "./device";
import { formatBytes, formatShare } from "./format";
import type { ProfilerModel } from "./model";
import type { StepRecord } from "./steps";
import type { TimelineView } from "./timeline";
import { segmentMap, type SegmentMap } from "./segments";

export interface DeviceSummary {
  device: number;
  allocated_bytes: number;
  /** Live bytes as requested by the program (allocated minus the allocator's rounding). */
  requested_bytes: number;
  reserved_bytes: number;
  active_bytes: number;
  peak_allocated_bytes: number;
  peak_reserved_bytes: number;
  peak_active_bytes: number;
  n_alloc: number;
  n_free: number;
  n_segment_alloc: number;
  n_segment_free: number;
  n_oom: number;
  /** Allocation retries (polling mode only; null when the header does not say). */
  n_retries: number | null;
  /** "header": exact running totals from the ring; "events": summed from the records seen. */
  totals_source: "header" | "events";
  /** Allocated and reserved as summed from the records seen (equal to the header's when none was lost). */
  allocated_events_bytes: number | null;
  reserved_events_bytes: number | null;
  reserved_unallocated_bytes: number;
  nvml_used_bytes: number | null;
  nvml_pid: number | null;
  nvml_time_us: number | null;
  /** NVML used − reserved: CUDA context, NCCL, cuBLAS workspaces… (null without NVML). */
  non_pytorch_bytes: number | null;
  live_blocks: number;
  live_block_bytes: number;
  segments: number;
  /** Bytes the header counts as allocated that no live block of the model accounts for (up to
   *  1 MiB per live block above 1 MiB is the allocator not splitting a block: detail stays whole). */
  unaccounted_bytes: number;
  /** Block detail is incomplete (records lost, frees of blocks never seen, or unaccounted bytes). */
  partial: boolean;
  lost_records: number;
  step: number;
  phase: string;
  range: number;
  range_name: string | null;
  first_time_us: number | null;
  last_time_us: number | null;
}

export interface Summary {
  pid: number | null;
  mode: string | null;
  closed: boolean;
  events: number;
  lost_records: number;
  /** Allocator records naming a device outside 0..15, skipped. */
  invalid_records: number;
  partial: boolean;
  devices: DeviceSummary[];
}

function num(v: number): number | null {
  return v === v ? v : null;
}

function liveBytes(d: DeviceState): number {
  let s = 0;
  for (let c = 0; c < N_CAT; c++) s += d.liveByCat[c]!;
  return s;
}

export function deviceSummary(m: ProfilerModel, d: DeviceState): DeviceSummary {
  const h = m.headerTotals.get(d.device);
  const allocated = h ? h.allocated : d.allocated;
  const reserved = h ? h.reserved : d.reserved;
  const live = liveBytes(d);
  const unaccounted = allocated - live;
  // Up to 1 MiB per large block is the allocator's rounding, not missing detail (see DeviceState.liveLarge).
  const rounding = unaccounted >= 0 && unaccounted <= d.liveLarge * LARGE;
  const partial = d.lost > 0 || d.unknownFrees > 0 || d.replacedBlocks > 0 || !rounding;
  return {
    device: d.device,
    allocated_bytes: allocated,
    requested_bytes: h && typeof h.requested === "number" ? h.requested : d.requested,
    reserved_bytes: reserved,
    active_bytes: h ? h.active : d.active,
    peak_allocated_bytes: h ? h.peak_allocated : d.peakAllocated,
    peak_reserved_bytes: h ? h.peak_reserved : d.peakReserved,
    peak_active_bytes: h ? h.peak_active : d.peakActive,
    n_alloc: h ? h.n_alloc : d.nAlloc,
    n_free: h ? h.n_free : d.nFree,
    n_segment_alloc: h ? h.n_segment_alloc : d.nSegmentAlloc,
    n_segment_free: h ? h.n_segment_free : d.nSegmentFree,
    n_oom: h ? h.n_oom : d.nOom,
    n_retries: h ? h.n_retries : null,
    totals_source: h ? "header" : "events",
    allocated_events_bytes: d.allocated,
    reserved_events_bytes: d.reserved,
    reserved_unallocated_bytes: reserved - allocated,
    nvml_used_bytes: d.nvmlUsed,
    nvml_pid: d.nvmlPid,
    nvml_time_us: num(d.nvmlTime_us),
    non_pytorch_bytes: d.nvmlUsed === null ? null : d.nvmlUsed - reserved,
    live_blocks: d.blocks.count,
    live_block_bytes: live,
    segments: d.segSize.size,
    unaccounted_bytes: unaccounted,
    partial,
    lost_records: d.lost,
    step: d.step,
    phase: PHASES[d.phase] ?? `phase#${d.phase}`,
    range: d.range,
    range_name: m.rangeName(d.range),
    first_time_us: num(d.firstTime_us),
    last_time_us: num(d.lastTime_us),
  };
}

/** Totals per device: allocated / reserved / active, peaks, counts, NVML beside them. */
export function summary(m: ProfilerModel): Summary {
  const devices = m.devices.map((d) => deviceSummary(m, d));
  // Devices the header knows and no event has touched yet still show their totals.
  for (const [dev, h] of m.headerTotals) {
    if (m.device(dev)) continue;
    devices.push({
      device: dev,
      allocated_bytes: h.allocated,
      requested_bytes: h.requested,
      reserved_bytes: h.reserved,
      active_bytes: h.active,
      peak_allocated_bytes: h.peak_allocated,
      peak_reserved_bytes: h.peak_reserved,
      peak_active_bytes: h.peak_active,
      n_alloc: h.n_alloc,
      n_free: h.n_free,
      n_segment_alloc: h.n_segment_alloc,
      n_segment_free: h.n_segment_free,
      n_oom: h.n_oom,
      n_retries: h.n_retries,
      totals_source: "header",
      allocated_events_bytes: null,
      reserved_events_bytes: null,
      reserved_unallocated_bytes: h.reserved - h.allocated,
      nvml_used_bytes: null,
      nvml_pid: null,
      nvml_time_us: null,
      non_pytorch_bytes: null,
      live_blocks: 0,
      live_block_bytes: 0,
      segments: 0,
      unaccounted_bytes: h.allocated,
      partial: h.allocated !== 0,
      lost_records: m.lostRecords,
      step: 0,
      phase: "other",
      range: 0,
      range_name: null,
      first_time_us: null,
      last_time_us: null,
    });
  }
  devices.sort((a, b) => a.device - b.device);
  return {
    pid: m.pid,
    mode: m.mode,
    closed: m.closed,
    events: m.eventsIngested,
    lost_records: m.lostRecords,
    invalid_records: m.invalidRecords,
    partial: devices.some((d) => d.partial) || m.invalidRecords > 0,
    devices,
  };
}

/** Pick a device: the one asked for, else the first that has events. */
export function pickDevice(m: ProfilerModel, device?: number): DeviceState | undefined {
  if (device !== undefined) return m.device(device);
  return m.devices[0];
}

function requireDevice(m: ProfilerModel, device?: number): DeviceState {
  const d = pickDevice(m, device);
  if (!d) {
    const known = m.devices.map((x) => x.device).join(", ") || "none yet";
    throw new RangeError(
      device === undefined ? "no events yet: no device to show" : `no events for device ${device} (devices with events: ${known})`,
    );
  }
  return d;
}

export function timeline(
  m: ProfilerModel,
  opts: { resolution_us?: number; since_us?: number; device?: number } = {},
): TimelineView & { device: number } {
  const d = requireDevice(m, opts.device);
  return { device: d.device, ...d.timeline.view(opts.resolution_us ?? 0, opts.since_us ?? -Infinity) };
}

// ---- breakdown per step ----

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
  for (let p = 0; p < 4; p++) fromStep += r.peakByPhase[p]!;
  const phases: PhaseBreakdown[] = [];
  for (let p = 0; p < 4; p++) {
    phases.push({
      phase: PHASES[p]!,
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
  const peakPhase = r.peak_phase >= 0 ? (PHASES[r.peak_phase] ?? null) : null;
  const peakRangeName = m.rangeName(r.peak_range);
  // The categories that make up the peak, largest first: those with at least a tenth of it (three at most).
  const parts = Object.entries(byCat)
    .filter(([, v]) => peak > 0 && v / peak >= 0.1)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([k, v]) => `${formatShare(share(v))} ${k.replace("_", " ")}`);
  const where = peakPhase ? `in ${peakPhase} of step ${r.step}` : `in step ${r.step}`;
  const words =
    `peak ${formatBytes(peak)} reached ${where}` + (peakRangeName ? ` (range ${peakRangeName})` : "") + (parts.length ? `: ${parts.join(", ")}` : "");
  const endAlloc = complete ? r.allocated_at_end : d.allocated;
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
  peak_allocated_bytes: number;
  peak_phase: string | null;
  alloc_bytes: number;
  gradient_held_from_earlier_steps_bytes: number | null;
}

/** One line per kept step (oldest first), the running one last: for a step table or a sparkline. */
export function steps(m: ProfilerModel, opts: { device?: number } = {}): { device: number; steps: StepLine[] } {
  const d = requireDevice(m, opts.device);
  const line = (r: StepRecord, complete: boolean): StepLine => ({
    step: r.step,
    complete,
    start_us: num(r.start_us),
    duration_us: complete ? num(r.end_us - r.start_us) : num(d.lastTime_us - r.start_us),
    allocated_at_start_bytes: r.allocated_at_start,
    held_at_end_bytes: complete ? r.allocated_at_end : d.allocated,
    peak_allocated_bytes: r.peak_allocated,
    peak_phase: r.peak_phase >= 0 ? (PHASES[r.peak_phase] ?? null) : null,
    alloc_bytes: r.alloc_bytes,
    gradient_held_from_earlier_steps_bytes: num(r.gradHeldBytes),
  });
  return { device: d.device, steps: [...d.steps.map((r) => line(r, true)), line(d.cur, false)] };
}

// ---- categories of live memory ----

export interface CategoryLine {
  category: string;
  bytes: number;
  blocks: number;
  share: number;
}

export interface Categories {
  device: number;
  total_bytes: number;
  categories: CategoryLine[];
  /** Bytes allocated in the running phase: counted under the category they take if they outlive it. */
  unresolved_bytes: number;
  unresolved_phase: string;
}

/** Live memory by category (names from the agent where known, lifetimes where not). */
export function categories(m: ProfilerModel, opts: { device?: number } = {}): Categories {
  const d = requireDevice(m, opts.device);
  const bytes = new Float64Array(CATEGORIES.length);
  const count = new Float64Array(CATEGORIES.length);
  for (let c = 0; c < CATEGORIES.length; c++) {
    bytes[c] = d.liveByCat[c]!;
    count[c] = d.liveCountByCat[c]!;
  }
  const into = survivorCategory(d.phase);
  bytes[into]! += d.liveByCat[CAT_UNRESOLVED]!;
  count[into]! += d.liveCountByCat[CAT_UNRESOLVED]!;
  let total = 0;
  for (let c = 0; c < CATEGORIES.length; c++) total += bytes[c]!;
  const lines: CategoryLine[] = [];
  for (let c = 0; c < CATEGORIES.length; c++)
    lines.push({ category: CATEGORIES[c]!, bytes: bytes[c]!, blocks: count[c]!, share: total > 0 ? bytes[c]! / total : 0 });
  lines.sort((a, b) => b.bytes - a.bytes);
  return {
    device: d.device,
    total_bytes: total,
    categories: lines,
    unresolved_bytes: d.liveByCat[CAT_UNRESOLVED]!,
    unresolved_phase: PHASES[d.phase] ?? `phase#${d.phase}`,
  };
}

// ---- live blocks ----

export interface BlockLine {
  address: number;
  size_bytes: number;
  stream: number;
  time_us: number;
  step: number | null;
  phase: string;
  range: number;
  range_name: string | null;
  name: string | null;
  category: string;
  /** Where the category comes from: the agent's names, the block's lifetime, or a resync. */
  category_source: "names" | "lifetime" | "resync";
}

export interface BlocksView {
  device: number;
  total_blocks: number;
  total_bytes: number;
  partial: boolean;
  sort: "size" | "time" | "address";
  blocks: BlockLine[];
}

// The last order per device and sort key, reused while no block came or went (views ask every frame).
const orderMemo = new WeakMap<DeviceState, Map<string, { version: number; slots: Int32Array }>>();

function sortedSlots(d: DeviceState, sort: "size" | "time" | "address"): Int32Array {
  let m = orderMemo.get(d);
  if (!m) orderMemo.set(d, (m = new Map()));
  const hit = m.get(sort);
  if (hit && hit.version === d.blocks.changes) return hit.slots;
  const b = d.blocks;
  const slots = b.bySlot.values();
  if (sort === "size") slots.sort((x, y) => b.size[y]! - b.size[x]! || b.address[x]! - b.address[y]!);
  else if (sort === "time") slots.sort((x, y) => b.serial[y]! - b.serial[x]! || b.address[x]! - b.address[y]!);
  else slots.sort((x, y) => b.address[x]! - b.address[y]!);
  m.set(sort, { version: d.blocks.changes, slots });
  return slots;
}

/** Live blocks, largest first by default, at most `limit` of them (default 500). */
export function blocks(
  m: ProfilerModel,
  opts: { device?: number; limit?: number; sort?: "size" | "time" | "address" } = {},
): BlocksView {
  const d = requireDevice(m, opts.device);
  const b = d.blocks;
  const sort = opts.sort ?? "size";
  const limit = opts.limit ?? 500;
  const slots = sortedSlots(d, sort);
  const into = survivorCategory(d.phase);
  const out: BlockLine[] = [];
  for (let k = 0; k < slots.length && k < limit; k++) {
    const s = slots[k]!;
    const cat = b.category[s]!;
    out.push({
      address: b.address[s]!,
      size_bytes: b.size[s]!,
      stream: b.stream[s]!,
      time_us: b.time_us[s]!,
      step: b.step[s] === RESYNCED_STEP ? null : b.step[s]!,
      phase: PHASES[b.phase[s]!] ?? `phase#${b.phase[s]}`,
      range: b.range[s]!,
      range_name: m.rangeName(b.range[s]!),
      name: b.names[s] ?? null,
      category: CATEGORIES[cat === CAT_UNRESOLVED ? into : cat]!,
      category_source: b.flags[s] === 2 ? "resync" : b.flags[s] === 1 ? "names" : "lifetime",
    });
  }
  return {
    device: d.device,
    total_blocks: b.count,
    total_bytes: liveBytes(d),
    partial: deviceSummary(m, d).partial,
    sort,
    blocks: out,
  };
}

// ---- segments ----

/** The segment map of a device: segments with their blocks (withBlocks) and the free ranges.
 *  Takes the model (and a device index) like the other queries, or a device's state directly. */
export function segments(m: ProfilerModel | DeviceState, opts: { device?: number; withBlocks?: boolean } = {}): SegmentMap {
  const d = m instanceof DeviceState ? m : requireDevice(m, opts.device);
  return segmentMap(d, { withBlocks: opts.withBlocks });
}
