// Pure queries over the model: what views show. Each returns a plain JSON-able object (bytes as
// integers, times in µs, null for "not available"); a number in the TUI and the same number in
// JSON come from one of these functions.

import { PHASE_NAMES } from "../ffi/events";
import { CATEGORIES, CAT_BUFFER, CAT_GRADIENT, CAT_OPTIMIZER_STATE, CAT_PARAMETER, CAT_UNRESOLVED, survivorCategory } from "./categories";
import type { SyncPoint } from "./consistency";
import { BEFORE_ATTACH, FROM_NAMES, RESYNCED, RESYNCED_STEP } from "./blocks";
import { DeviceState } from "./device";
import { formatBytes } from "../words";
import type { ProfilerModel } from "./model";
import type { TimelineView } from "./timeline";
import { segmentMap, type SegmentMap } from "./segment-map";

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
  /** Where allocated, active, reserved and their peaks come from. "blocks": the model's blocks, each
   *  of torch's size (torch's memory_allocated(), active_bytes and max_memory_allocated() at the
   *  point of the stream read); "hook": the ring header's running totals (torch's own figures at
   *  the agent's last copy, moved by requested sizes since), where the blocks are not all known;
   *  "records": the records' requests rounded (a replay before its header is read). */
  totals_source: TotalsSource;
  /** Why the totals are not the blocks' (null where they are). */
  totals_cause: string | null;
  /** Why the peak shown is not the highest the blocks reached (null where it is). */
  peak_note: string | null;
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
  /** At the last sync record: torch's allocated that no live block accounts for (up to 1 MiB per
   *  live block above 1 MiB is the allocator not splitting a block); null before any sync. */
  unaccounted_bytes: number | null;
  /** Block detail is incomplete, for the causes in `partial_causes`. */
  partial: boolean;
  /** Why, in words: records lost (the ring lapped), memory from before the attach, blocks filled
   *  in by a resync, a sync that disagreed. Empty when the detail is whole. */
  partial_causes: string[];
  /** Bytes torch held when the agent attached that no free has shown gone (not in block detail). */
  before_attach_bytes: number;
  /** Block detail against torch's own figures at each sync record (step boundaries). */
  sync: SyncSummary;
  lost_records: number;
  step: number;
  phase: string;
  range: number;
  range_name: string | null;
  first_time_us: number | null;
  last_time_us: number | null;
}

export interface SyncSummary {
  checks: number;
  agreed: number;
  disagreed: number;
  /** Syncs not compared: an event raced the read, or records were lost just before. */
  skipped: number;
  last: SyncPoint | null;
}

export interface Summary {
  pid: number | null;
  mode: string | null;
  closed: boolean;
  events: number;
  lost_records: number;
  /** Records naming a device outside 0..15 (skipped), a range id beyond 65535 (taken as no range), or
   *  an action this model does not know (skipped). */
  invalid_records: number;
  partial: boolean;
  devices: DeviceSummary[];
}

export type TotalsSource = "blocks" | "hook" | "records";

/** Why `d`'s blocks do not give torch's totals (null: they do). */
export function totalsCause(d: DeviceState, causes: string[]): string | null {
  if (causes.length > 0) return `block detail partial: ${causes.join("; ")}`;
  const n = d.unsizedBlocks;
  if (n > 0) return `${n} large block${n === 1 ? "" : "s"} in segments the records never laid out (allocated before the recording): each may be up to 1 MiB larger in torch`;
  return null;
}

/** The one peak shown: torch's. The blocks' own highest where they give torch's totals; after an
 *  attach torch's max_memory_allocated() may have been reached before it: the device's peak holds
 *  it from the first sync point that read it (DeviceState.peaksFromTorch), else the header's (the
 *  agent's copy, ahead of the records) says it. A note only where the peak is not one the blocks
 *  reached since the attach: where they reached it again, it is theirs too. */
function peakOf(m: ProfilerModel, d: DeviceState, source: TotalsSource, h: { peak_allocated: number } | undefined): { peak: number; note: string | null } {
  const own = d.peakAllocated;
  if (source === "blocks") {
    const torch = m.seedStatus !== null && h && h.peak_allocated > own ? h.peak_allocated : own;
    const blocks = d.blocksPeakAllocated;
    if (torch > blocks) return { peak: torch, note: `torch's max_memory_allocated(), reached before the agent attached; ${formatBytes(blocks)} since` };
    return { peak: torch, note: null };
  }
  if (!h) return { peak: own, note: null };
  return { peak: h.peak_allocated, note: h.peak_allocated !== own ? `torch's max_memory_allocated() as the agent last read it; the records reach ${formatBytes(own)}` : null };
}

/** torch's max_memory_reserved() where the blocks give the totals: the segments' highest, or after
 *  an attach the peak from before it, as a sync point read it (in the device's peak) or the
 *  header says it (the hook keeps the header's reserved peak from torch's at the attach on). */
function peakReservedOf(m: ProfilerModel, d: DeviceState, h: { peak_reserved: number } | undefined): number {
  return m.seedStatus !== null && h && h.peak_reserved > d.peakReserved ? h.peak_reserved : d.peakReserved;
}

export function num(v: number): number | null {
  return v === v ? v : null;
}

/**
 * Why a device's block detail is partial, in words (empty: it is whole). Only named causes: the
 * live totals in the ring header run ahead of the records read, so they are never compared with
 * the blocks; a sync record, tied to a point of the stream, is.
 */
export function partialCauses(d: DeviceState): string[] {
  const why: string[] = [];
  if (d.lost > 0) why.push(`${d.lost} records lost (the ring lapped)`);
  const before = d.consistency.preAttachBytes(d.unknownFreeBytes);
  if (before > 0)
    why.push(d.consistency.lostBeforeFirst ? `${formatBytes(before)} allocated in records lost before the first sync, or before the agent attached` : `${formatBytes(before)} allocated before the agent attached`);
  if (d.unknownFrees > 0) why.push(`${d.unknownFrees} frees of blocks allocated before the recording (${formatBytes(d.unknownFreeBytes)})`);
  if (d.replacedBlocks > 0) why.push(`${d.replacedBlocks} blocks whose free was missed`);
  if (d.blocks.resynced > 0) why.push(`${d.blocks.resynced} blocks filled in by a resync (when and where they were allocated is unknown)`);
  const last = d.consistency.last;
  if (last && !last.agreed)
    why.push(
      `at step ${last.step} torch counted ${formatBytes(last.torch_allocated_bytes)} allocated, the blocks ${formatBytes(last.block_bytes)}` +
        (last.requested_difference_bytes !== 0 ? ` (requested bytes differ by ${formatBytes(last.requested_difference_bytes)})` : ""),
    );
  return why;
}

export function deviceSummary(m: ProfilerModel, d: DeviceState): DeviceSummary {
  const causes = partialCauses(d);
  const cause = totalsCause(d, causes);
  const source: TotalsSource = cause === null ? "blocks" : m.headerTotals.has(d.device) ? "hook" : "records";
  // the header's figures only where the blocks do not give torch's
  const h = source === "hook" ? m.headerTotals.get(d.device) : undefined;
  const allocated = h ? h.allocated : d.allocated;
  const reserved = h ? h.reserved : d.reserved;
  const live = d.liveBytes();
  const c = d.consistency;
  const peak = peakOf(m, d, source, source === "hook" ? h : m.headerTotals.get(d.device));
  // counts since the attach: the header's are exact whatever the records (none lost or not)
  const hc = m.headerTotals.get(d.device);
  return {
    device: d.device,
    allocated_bytes: allocated,
    requested_bytes: h && typeof h.requested === "number" ? h.requested : d.requested,
    reserved_bytes: reserved,
    active_bytes: h ? h.active : d.active,
    peak_allocated_bytes: peak.peak,
    peak_reserved_bytes: h ? h.peak_reserved : peakReservedOf(m, d, hc),
    peak_active_bytes: h ? h.peak_active : d.peakActive,
    n_alloc: hc ? hc.n_alloc : d.nAlloc,
    n_free: hc ? hc.n_free : d.nFree,
    n_segment_alloc: hc ? hc.n_segment_alloc : d.nSegmentAlloc,
    n_segment_free: hc ? hc.n_segment_free : d.nSegmentFree,
    n_oom: hc ? hc.n_oom : d.nOom,
    n_retries: hc ? hc.n_retries : null,
    totals_source: source,
    totals_cause: cause,
    peak_note: peak.note,
    allocated_events_bytes: d.allocated,
    reserved_events_bytes: d.reserved,
    reserved_unallocated_bytes: reserved - allocated,
    nvml_used_bytes: d.nvmlUsed,
    nvml_pid: d.nvmlPid,
    nvml_time_us: num(d.nvmlTime_us),
    non_pytorch_bytes: d.nvmlUsed === null ? null : d.nvmlUsed - reserved,
    live_blocks: d.blocks.count,
    live_block_bytes: live,
    segments: d.segments.count,
    unaccounted_bytes: c.last ? c.last.unaccounted_bytes : null,
    partial: causes.length > 0,
    partial_causes: causes,
    before_attach_bytes: c.preAttachBytes(d.unknownFreeBytes),
    sync: { checks: c.checks, agreed: c.agreed, disagreed: c.disagreed, skipped: c.skipped, last: c.last },
    lost_records: d.lost,
    step: d.step,
    phase: PHASE_NAMES[d.phase] ?? `phase#${d.phase}`,
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
    // A device this process never used (a DDP rank's neighbour GPU, visible to it) is not its own.
    if (m.device(dev) || (h.reserved === 0 && h.allocated === 0 && h.n_alloc === 0)) continue;
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
      totals_source: "hook",
      totals_cause: h.allocated === 0 ? null : "no allocator record of this device read",
      peak_note: null,
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
      unaccounted_bytes: null,
      // No record of this device was read: memory it holds has no block detail at all.
      partial: h.allocated !== 0,
      partial_causes:
        h.allocated === 0
          ? []
          : [`${formatBytes(h.allocated)} allocated and no allocator record read (${m.mode === "polling" ? "polling mode: the hook is not running" : "allocated before the agent attached"})`],
      before_attach_bytes: 0,
      sync: { checks: 0, agreed: 0, disagreed: 0, skipped: 0, last: null },
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

export function requireDevice(m: ProfilerModel, device?: number): DeviceState {
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
    bytes[c] = d.blocks.bytesByCat[c]!;
    count[c] = d.blocks.countByCat[c]!;
  }
  const into = survivorCategory(d.phase);
  bytes[into]! += d.blocks.bytesByCat[CAT_UNRESOLVED]!;
  count[into]! += d.blocks.countByCat[CAT_UNRESOLVED]!;
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
    unresolved_bytes: d.blocks.bytesByCat[CAT_UNRESOLVED]!,
    unresolved_phase: PHASE_NAMES[d.phase] ?? `phase#${d.phase}`,
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
  /** "agent": named by the agent's `names` reply; "earlier step": the same tensor's name at this
   *  address and size in an earlier step (a gradient made again each step); null: unnamed. */
  name_source: "agent" | "earlier step" | null;
  shape: number[] | null;
  dtype: string | null;
  /** What a view shows for the block: its name, else what is known of it, never a bare address. */
  label: string;
  category: string;
  /** Where the category comes from: the agent's names, the block's lifetime, a resync, or an
   *  attach's seed (allocated before the attach, not yet named). */
  category_source: "names" | "lifetime" | "resync" | "before_attach";
  /** The stack that allocated it (model.stacks' id); 0: unknown. */
  stack: number;
}

/** An unnamed block in words: its category and where it was allocated (phase, range, step). */
export function blockLabel(category: string, phase: string, rangeName: string | null, step: number | null): string {
  const where = [phase === "other" ? null : phase, rangeName ? `in ${rangeName}` : null, step === null ? "step unknown" : `step ${step}`].filter(Boolean);
  return `(${category}, ${where.join(", ")})`;
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

/** Live blocks, largest first by default (`reverse`: smallest, oldest, highest address first), at most `limit` of them (default 500). */
export function blocks(
  m: ProfilerModel,
  opts: { device?: number; limit?: number; sort?: "size" | "time" | "address"; reverse?: boolean } = {},
): BlocksView {
  const d = requireDevice(m, opts.device);
  const b = d.blocks;
  const sort = opts.sort ?? "size";
  const limit = opts.limit ?? 500;
  const slots = sortedSlots(d, sort);
  const out: BlockLine[] = [];
  for (let k = 0; k < slots.length && k < limit; k++) {
    const s = slots[opts.reverse ? slots.length - 1 - k : k]!;
    const name = b.names[s] ?? null;
    const tensor = b.tensors[s];
    const step = b.step[s] === RESYNCED_STEP ? null : b.step[s]!;
    const phase = PHASE_NAMES[b.phase[s]!] ?? `phase#${b.phase[s]}`;
    const rangeName = m.rangeName(b.range[s]!);
    const category = d.categoryOf(s);
    out.push({
      address: b.address[s]!,
      size_bytes: b.size[s]!,
      stream: b.stream[s]!,
      time_us: b.time_us[s]!,
      step,
      phase,
      range: b.range[s]!,
      range_name: rangeName,
      name,
      name_source: name === null ? null : tensor?.carried ? "earlier step" : "agent",
      shape: tensor?.shape ?? null,
      dtype: tensor?.dtype ?? null,
      label: name ?? (b.flags[s] === BEFORE_ATTACH ? `(${category}, allocated before the attach)` : blockLabel(category, phase, rangeName, step)),
      category,
      category_source: b.flags[s] === RESYNCED ? "resync" : b.flags[s] === FROM_NAMES ? "names" : b.flags[s] === BEFORE_ATTACH ? "before_attach" : "lifetime",
      stack: b.stack[s]!,
    });
  }
  return {
    device: d.device,
    total_blocks: b.count,
    total_bytes: d.liveBytes(),
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

/**
 * Bytes in live blocks of at least `minBytes` that have no name and outlived a step's phase as a
 * parameter, gradient, optimizer state or buffer: what the agent's names would name. Walks every
 * block: ask it now and then, not per frame.
 */
export function unnamedBytes(m: ProfilerModel, minBytes = 1024 * 1024): number {
  let total = 0;
  for (const d of m.devices) {
    const b = d.blocks;
    for (const s of b.bySlot.values()) {
      const c = b.category[s]!;
      if (b.names[s] === undefined && b.size[s]! >= minBytes && (c === CAT_PARAMETER || c === CAT_GRADIENT || c === CAT_OPTIMIZER_STATE || c === CAT_BUFFER))
        total += b.size[s]!;
    }
  }
  return total;
}
