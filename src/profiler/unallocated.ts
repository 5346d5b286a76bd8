// Reserved but unallocated memory (words.ts: UNALLOCATED) of one device, in the figures the
// finding, the screens and the JSON share: now, and at a step's peak. Now swings within a step
// (a training step frees its activations before the next one allocates them again: read between
// steps it is the whole activation memory, read at the peak it is what the cache holds beyond
// the step's own need); at the peak it is what the cache holds that even the step's highest moment
// does not use. Where a snapshot named the private pools (CUDA graphs, torch.cuda.MemPool), their
// memory is left out and shown as pools; a ring's cannot be told apart (pools.ts).

import type { DeviceState } from "./device";
import type { ProfilerModel } from "./model";
import type { OomIncident } from "./oom";
import { poolTotals, type PrivatePool } from "./pools";
import { deviceSummary } from "./queries";
import type { StepRecord } from "./steps";
import { formatBytes, formatShare, poolLabel, PRIVATE_POOLS, UNALLOCATED, unallocatedWords } from "../words";

export interface UnallocatedView {
  device: number;
  /** reserved − allocated now (the ring header's totals where it has them), private pools left out. */
  now_bytes: number;
  /** The step whose peak is measured; null before the device's first event. */
  step: number | null;
  /** False: the running step, whose peak may still rise. */
  step_complete: boolean;
  peak_allocated_bytes: number | null;
  /** Reserved at the moment of that peak (StepRecord.reserved_at_peak). */
  reserved_at_peak_bytes: number | null;
  /** reserved − allocated at that peak, private pools left out: what the cache held that the step
   *  never used at once. */
  at_peak_bytes: number | null;
  /** The step's largest block: the most any single free block had to hold for it. */
  largest_alloc_bytes: number | null;
  /** null where the pools cannot be known (a ring); empty where a snapshot has none. */
  private_pools: readonly PrivatePool[] | null;
  /** The private pools' reserved − allocated, taken out of now_bytes and at_peak_bytes (their
   *  state at the snapshot's end: a graph's pool changes little once captured). */
  private_unallocated_bytes: number;
}

/** The step a view measures: the last complete one, else the running one. */
export function measuredStep(d: DeviceState): StepRecord | null {
  return d.steps[d.steps.length - 1] ?? (d.fresh ? null : d.cur);
}

/** The figures of `d`, at the peak of `step` (default: measuredStep). */
export function unallocatedView(m: ProfilerModel, d: DeviceState, step: StepRecord | null = measuredStep(d)): UnallocatedView {
  const s = deviceSummary(m, d);
  const pools = d.privatePools;
  const p = pools ? poolTotals(pools) : { reserved_bytes: 0, allocated_bytes: 0 };
  const privateUnallocated = Math.max(0, p.reserved_bytes - p.allocated_bytes);
  return {
    device: d.device,
    now_bytes: Math.max(0, s.reserved_unallocated_bytes - privateUnallocated),
    step: step ? step.step : null,
    step_complete: step !== null && step !== d.cur,
    peak_allocated_bytes: step ? step.peak_allocated : null,
    reserved_at_peak_bytes: step ? step.reserved_at_peak : null,
    at_peak_bytes: step ? Math.max(0, step.reserved_at_peak - step.peak_allocated - privateUnallocated) : null,
    largest_alloc_bytes: step ? step.largest_alloc_bytes : null,
    private_pools: pools,
    private_unallocated_bytes: privateUnallocated,
  };
}

/** Whether the device's memory comes from expandable segments (PYTORCH_CUDA_ALLOC_CONF=
 *  expandable_segments:True): its segments were mapped pages, none cudaMalloc'd. */
export function expandableSegments(d: DeviceState): boolean {
  return d.nSegmentAlloc === 0 && d.segments.count > 0;
}

/** "reserved but unallocated 14.45 GiB now, 2.23 GiB at step 68's peak": the screens' words. */
export function unallocatedLine(u: UnallocatedView): string {
  const at = u.at_peak_bytes === null ? "" : `, ${formatBytes(u.at_peak_bytes)} at step ${u.step}'s peak${u.step_complete ? "" : " (running)"}`;
  return `${UNALLOCATED} ${formatBytes(u.now_bytes)} now${at}`;
}

/** The private pools in words, or null where there are none or they cannot be known. */
export function poolsLine(pools: readonly PrivatePool[] | null): string | null {
  if (!pools || pools.length === 0) return null;
  const each = pools.map((p) => `${poolLabel(p.pool_id)} ${formatBytes(p.reserved_bytes)} reserved, ${formatBytes(p.allocated_bytes)} allocated`);
  return `${PRIVATE_POOLS}: ${each.join("; ")}`;
}

/** An OOM the reserved but unallocated bytes would have held, with no free block that large. */
export function fragmentedOom(o: OomIncident): boolean {
  return o.reserved_bytes - o.allocated_bytes >= o.request_bytes && o.largest_free_block_bytes < o.request_bytes;
}

/** What the finding found (findings.ts decides it; these functions only word it). */
export interface UnallocatedCost {
  u: UnallocatedView;
  /** An OOM that fragmentation made fail. */
  oom: OomIncident | null;
  /** Allocation retries beyond the OOMs' (0: none that count). */
  retries: number;
  /** Memory idle at the step's peak. */
  idle: boolean;
  /** The run already uses expandable segments: that advice does not apply. */
  expandable: boolean;
  /** What empty_cache() would release now, where that advice applies; null where it does not. */
  emptyCacheBytes: number | null;
}

const atPeakOf = (u: UnallocatedView) => u.at_peak_bytes ?? 0;
const timesLargest = (u: UnallocatedView) => Math.floor(atPeakOf(u) / Math.max(1, u.largest_alloc_bytes ?? 0));

export function unallocatedTitle(c: UnallocatedCost): string {
  const { u, oom } = c;
  if (oom) return `a request of ${formatBytes(oom.request_bytes)} failed with ${unallocatedWords(oom.reserved_bytes - oom.allocated_bytes)}`;
  if (c.retries > 0) return `${c.retries} allocation retries; ${u.step === null ? `${unallocatedWords(u.now_bytes)} now` : `${unallocatedWords(atPeakOf(u))} at step ${u.step}'s peak`}`;
  return `${unallocatedWords(atPeakOf(u))} at step ${u.step}'s peak, ${timesLargest(u)}× its largest block`;
}

/** The figures, what they cost, the private pools, and only the advice that applies. */
export function unallocatedEvidence(c: UnallocatedCost): string {
  const { u, oom } = c;
  const parts: string[] = [];
  const peak =
    u.step === null
      ? ""
      : `; at step ${u.step}'s peak ${formatBytes(atPeakOf(u))} (${formatBytes(u.peak_allocated_bytes!)} allocated of ${formatBytes(u.reserved_at_peak_bytes!)} reserved), the step's largest block ${formatBytes(u.largest_alloc_bytes!)}`;
  parts.push(`${unallocatedWords(u.now_bytes)} now${peak}.`);
  if (oom)
    parts.push(
      `At the OOM of step ${oom.step} a request of ${formatBytes(oom.request_bytes)} failed although ${unallocatedWords(oom.reserved_bytes - oom.allocated_bytes)}: ` +
        `no free block was that large (the largest ${formatBytes(oom.largest_free_block_bytes)}), fragmentation.`,
    );
  if (c.retries > 0)
    parts.push(`torch counted ${c.retries} allocation retries besides its OOMs: each time cudaMalloc failed, the allocator freed its cache, synchronized the device and allocated again, in the middle of a step.`);
  if (c.idle) parts.push(`At its peak the step left ${formatShare(atPeakOf(u) / u.reserved_at_peak_bytes!)} of reserved unused, ${timesLargest(u)} times the largest block it asked for.`);
  const pools = poolsLine(u.private_pools);
  if (pools) parts.push(`Not counted here: ${pools}.`);
  else if (u.private_pools === null && c.idle)
    parts.push(`Memory of CUDA graphs (torch.compile mode="reduce-overhead") or torch.cuda.MemPool counts here too: a ring's records do not say which pool a segment is of (a snapshot's segments do).`);
  const advice: string[] = [];
  if (!c.expandable) advice.push("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place instead of leaving free pieces behind");
  if (!c.expandable && (oom || c.retries > 0)) advice.push("max_split_size_mb:N keeps free blocks above N MiB whole for the requests that need them");
  if (c.emptyCacheBytes !== null)
    advice.push(
      `empty_cache() would give ${formatBytes(c.emptyCacheBytes)} back to other processes now (segments holding no block${u.private_pools === null ? ", unless they are a private pool's" : ""}); the next step may reserve it again`,
    );
  if (advice.length) parts.push(`${advice.join("; ")}.`);
  return parts.join(" ");
}
