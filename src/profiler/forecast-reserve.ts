// What of the allocator's reserved memory at a step's peak the forecast must count beside the
// peak: the free memory the caching allocator cannot give back or hand out when it is short.
//
// Short of memory (its limit, or cudaMalloc failing), the allocator first returns every segment
// that is wholly free (release_cached_blocks) and tries again; what it cannot return is the free
// part of segments that still hold a block, and it can hand that part out only to requests that fit
// in it. So of reserved − allocated at the peak:
//   - whole free segments are left out (returned before an OOM);
//   - the free part of a segment holding a block stays, as the allocator's rounding and splits
//     (a 20 MiB segment for a 12 MiB request, a 2 MiB one for a small tensor) whose size does not
//     follow the batch;
//   - except where a segment larger than any long-lived block (alive from an earlier step:
//     parameters, optimizer state, buffers) holds long-lived blocks: it was made for a per-step block
//     (the logits, an activation) and long-lived memory was later put in it (an optimizer's state
//     made after the first backward, a gradient made while only such segments were free); it cannot
//     be returned, the next step's block of that size needs a new segment, and its size grows with
//     the batch while what lies in it does not: at r times the batch its free part is
//     size·r − (what it held at this peak). The per-step blocks in it are not grown there: at a
//     larger batch they no longer fit its rest and lie in segments of their own (counted in the
//     peak). On an H200 (issue 41) a fresh GPT-2 at 92 times 256 found 4.11 GiB free in segments in
//     use for its 4.41 GiB logits; from batch 16's layout this gives 4.06 GiB (growing the per-step
//     blocks in it too gave 3.43).
// That last part is the layout of this run: another start, or another batch, can place the
// long-lived blocks elsewhere. The forecast gives its largest batch with and without it.
// Pure: the device's segment table and the step's peak picture in.

import { RESYNCED_STEP } from "./blocks";
import type { DeviceState } from "./device";
import type { StepRecord } from "./steps";

const MiB = 2 ** 20;
/** The caching allocator's segment sizes (CUDACachingAllocator.cpp get_allocation_size). */
const SMALL_SIZE = MiB; // kSmallSize
const SMALL_BUFFER = 2 * MiB; // kSmallBuffer
const MIN_LARGE_ALLOC = 10 * MiB; // kMinLargeAlloc
const LARGE_BUFFER = 20 * MiB; // kLargeBuffer
const ROUND_LARGE = 2 * MiB; // kRoundLarge

/** The segment cudaMalloc'd for a block of `size` where no cached block fits it. */
export function segmentSizeFor(size: number): number {
  if (size <= SMALL_SIZE) return SMALL_BUFFER;
  if (size < MIN_LARGE_ALLOC) return LARGE_BUFFER;
  return Math.ceil(size / ROUND_LARGE) * ROUND_LARGE;
}

export interface AllocatorReserve {
  /** The free part of segments holding a block at the peak, those below aside: kept at any batch. */
  held_bytes: number;
  /** Segments made for a per-step block that hold long-lived blocks at the peak (see the header). */
  stranded: { segments: number; segment_bytes: number; per_step_bytes: number; long_lived_bytes: number; largest_segment_bytes: number };
  /** Whole segments free at the peak: returned before an OOM, not counted. */
  released_bytes: number;
  /** False: the segments are not those of the peak (or expandable segments): the whole slack is counted. */
  exact: boolean;
  /** reserved − allocated at the peak. */
  slack_bytes: number;
}

/** The free memory to count beside the peak at `ratio` times this step's batch (1: this step's). */
export function reserveAt(r: AllocatorReserve, ratio: number): number {
  const s = r.stranded;
  return r.held_bytes + Math.max(0, s.segment_bytes * ratio - s.per_step_bytes - s.long_lived_bytes);
}

/** The reserve of step `rec`'s peak, from its picture and the device's segments; where they do not
 *  tell (no picture, segments changed since, expandable segments), the whole slack, said so. Read
 *  once a step (the document and the screens ask at every tick; a finished step's picture does not
 *  change, and the segments are read as soon after it as anyone asks). */
export function allocatorReserve(d: DeviceState, rec: StepRecord, expandable: boolean): AllocatorReserve {
  const had = reserveOf.get(d);
  if (had && had.rec === rec) return had.reserve;
  const reserve = readReserve(d, rec, expandable);
  reserveOf.set(d, { rec, reserve });
  return reserve;
}

const reserveOf = new WeakMap<DeviceState, { rec: StepRecord; reserve: AllocatorReserve }>();

function readReserve(d: DeviceState, rec: StepRecord, expandable: boolean): AllocatorReserve {
  const slack = Math.max(0, rec.reserved_at_peak - rec.peak_allocated);
  const whole: AllocatorReserve = { held_bytes: slack, stranded: { segments: 0, segment_bytes: 0, per_step_bytes: 0, long_lived_bytes: 0, largest_segment_bytes: 0 }, released_bytes: 0, exact: false, slack_bytes: slack };
  if (expandable) return whole; // one mapped range per stream, grown and shrunk by pages: no segments to strand
  const pic = d.peaks.picture(d.cur, rec.step, d.categoryCode);
  if (!pic || pic.partial) return whole;
  const addrs = d.segments.addresses().filter((a) => d.segments.pool(a) === 0);
  const sizes = addrs.map((a) => d.segments.size(a)!);
  let total = 0;
  for (const s of sizes) total += s;
  // The segments now are the peak's only where they add up to what was reserved there.
  if (total !== pic.reserved_bytes) return whole;
  // Long-lived: alive from an earlier step and still at this step's end (an earlier step's outputs
  // that this one frees are per-step data), where the model keeps the end's picture.
  const end = d.peaks.picture(d.cur, rec.step, d.categoryCode, true);
  const alive = end ? new Set<number>() : null;
  if (end && alive) for (let i = 0; i < end.blocks.n; i++) alive.add(end.blocks.serial[i]!);
  const live = new Float64Array(addrs.length);
  const old = new Float64Array(addrs.length);
  const b = pic.blocks;
  let largestOld = 0;
  for (let i = 0; i < b.n; i++) {
    const at = b.address[i]!;
    // the segment holding it: the last one starting at or below it (addresses sorted)
    let lo = 0;
    let hi = addrs.length - 1;
    let k = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (addrs[mid]! <= at) {
        k = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (k < 0 || at >= addrs[k]! + sizes[k]!) return whole; // a block outside every segment: not the peak's
    live[k]! += b.size[i]!;
    // (a block a seed or snapshot set carries no step: from before the recording, long-lived)
    const earlier = b.step[i]! < rec.step || b.step[i] === RESYNCED_STEP;
    if (earlier && (!alive || alive.has(b.serial[i]!))) {
      old[k]! += b.size[i]!;
      if (b.size[i]! > largestOld) largestOld = b.size[i]!;
    }
  }
  const longLivedSegment = segmentSizeFor(largestOld);
  const r: AllocatorReserve = { held_bytes: 0, stranded: { segments: 0, segment_bytes: 0, per_step_bytes: 0, long_lived_bytes: 0, largest_segment_bytes: 0 }, released_bytes: 0, exact: true, slack_bytes: slack };
  for (let k = 0; k < addrs.length; k++) {
    const size = sizes[k]!;
    if (live[k] === 0) r.released_bytes += size;
    else if (old[k]! > 0 && largestOld > 0 && size > longLivedSegment) {
      const s = r.stranded;
      s.segments++;
      s.segment_bytes += size;
      s.per_step_bytes += live[k]! - old[k]!;
      s.long_lived_bytes += old[k]!;
      if (size > s.largest_segment_bytes) s.largest_segment_bytes = size;
    } else r.held_bytes += size - live[k]!;
  }
  return r;
}
