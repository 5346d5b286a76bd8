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
// That last part is the layout of this run, and the allocator places a block in the smallest free
// block that holds it (best fit). At batch b0 the long-lived blocks went into the per-step segment
// because no smaller free segment held them; segments that hold no per-step block at the peak
// (`spare`: free around it, made for a per-step block, their long-lived contents aside) grow with the
// batch too, and from the batch where one of them holds the largest of those long-lived blocks, they
// take them instead and the per-step segment stays free for its block: the reserve is then the
// spare segments' free part, grown. Unless the first step's peak, those spare segments free in it,
// passes the room: the allocator returns its free segments to make it (release_cached_blocks) and
// the long-lived blocks land in the per-step segment again. On an H200 (issue 41) a fresh GPT-2 with
// activation checkpointing ran at 120 to 148 without the logits' segment pinned (reserved the same at
// its second step as at its first), and at 149 to 151 its first step's reserved passed the 24 GiB
// cap, the logits' segment was pinned and its second step raised OOM with 6.8-6.9 GiB free in
// segments in use. That first step's reserved at a larger batch is not batch 16's grown: see
// firstReservedAt.
// The forecast gives its largest batch with this and without any pinning (its margin).
// Pure: the device's segment table and the step's peak picture in.

import { RESYNCED_STEP } from "./blocks";
import type { DeviceState } from "./device";
import type { StepRecord } from "./steps";
import { stepPicture } from "./step-pictures";

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
  /** Segments holding no per-step block at the peak, made for one (larger than what their long-lived
   *  blocks need), beside the stranded ones: each one's size and the long-lived bytes in it. */
  spare: Array<{ size: number; long_lived_bytes: number }>;
  /** The largest long-lived block in the stranded segments (what a spare segment must hold). */
  stranded_largest_block_bytes: number;
  /** The step the stranded segments' long-lived blocks were made in, its peak and reserved there and
   *  at its end, where the model still keeps it (null: not kept; the stranded layout is then taken at
   *  any batch). */
  first: { step: number; peak_bytes: number; reserved_bytes: number; end_reserved_bytes: number } | null;
  /** The largest per-step block at the peak below the allocator's large size (kMinLargeAlloc, 10 MiB:
   *  served from shared 20 MiB segments), 0 where none: see firstReservedAt. */
  shared_block_bytes: number;
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

/** Whether at `ratio` times this step's batch the spare segments, grown, take the stranded segments'
 *  long-lived blocks (best fit: one of them holds the largest, all of them hold them all). */
export function spareTakes(r: AllocatorReserve, ratio: number): boolean {
  if (r.stranded.segments === 0 || r.spare.length === 0) return false;
  let room = 0;
  let one = false;
  for (const s of r.spare) {
    const free = s.size * ratio - s.long_lived_bytes;
    if (free >= r.stranded_largest_block_bytes) one = true;
    room += Math.max(0, free);
  }
  return one && room >= r.stranded.long_lived_bytes;
}

/** The reserve at `ratio` where the spare segments hold the stranded long-lived blocks (spareTakes):
 *  the spare segments' free part grown, less what moved into it; the per-step segment is plain. */
export function reserveMovedAt(r: AllocatorReserve, ratio: number): number {
  let spare = 0;
  let spareNow = 0;
  for (const s of r.spare) {
    spare += s.size * ratio - s.long_lived_bytes;
    spareNow += s.size - s.long_lived_bytes;
  }
  return r.held_bytes - spareNow + Math.max(0, spare - r.stranded.long_lived_bytes);
}

/** The first step's reserved by the time it made the stranded long-lived blocks (its end), at `ratio`,
 *  given the forecast peak there and this step's peak: its peak is lower by what that step made after
 *  its peak (the optimizer's state), which does not scale; its free memory at the peak (the spare
 *  segments wholly free then among it) scales with the batch; the segments it made after its peak
 *  (small ones for gradients and the optimizer's state) do not, and count: reserved passing the room
 *  there returns the spare segments before the state is placed as well. And where a per-step block
 *  that shares the allocator's 20 MiB segments at this batch passes 10 MiB at that one, one more
 *  spare segment, grown: the allocator then serves it by best fit from a freed segment made for a
 *  larger per-step block, cutting it, and the next request of that segment's size makes a new one
 *  (GPT-2 with activation checkpointing, from batch 16 to 147: its 8 MiB checkpoints cut the freed
 *  294 MiB segments of its MLP and one more of them was made; replayed through the allocator's
 *  rules, torch's reserved at each batch is met within 0.01 GiB; this reading is above torch's by
 *  0.2%, the batch-16 layout grown without it 1.2% below). Null where it is not kept. */
export function firstReservedAt(r: AllocatorReserve, ratio: number, peakThere: number, peakNow: number): number | null {
  const f = r.first;
  if (!f) return null;
  const after = Math.max(0, f.end_reserved_bytes - f.reserved_bytes);
  return peakThere - Math.max(0, peakNow - f.peak_bytes) + Math.max(0, f.reserved_bytes - f.peak_bytes) * ratio + after + spareCutAt(r, ratio);
}

/** The one more spare segment firstReservedAt counts at `ratio` (its largest, grown), 0 where no
 *  per-step block under 10 MiB at this batch passes 10 MiB there. */
export function spareCutAt(r: AllocatorReserve, ratio: number): number {
  let cut = 0;
  if (r.shared_block_bytes * ratio >= MIN_LARGE_ALLOC) for (const s of r.spare) cut = Math.max(cut, segmentSizeFor(s.size * ratio));
  return cut;
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
  const whole: AllocatorReserve = { held_bytes: slack, stranded: { segments: 0, segment_bytes: 0, per_step_bytes: 0, long_lived_bytes: 0, largest_segment_bytes: 0 }, spare: [], stranded_largest_block_bytes: 0, first: null, shared_block_bytes: 0, released_bytes: 0, exact: false, slack_bytes: slack };
  if (expandable) return whole; // one mapped range per stream, grown and shrunk by pages: no segments to strand
  const pic = stepPicture(d, rec);
  if (!pic || pic.partial) return whole;
  const addrs = d.segments.addresses().filter((a) => d.segments.pool(a) === 0);
  const sizes = addrs.map((a) => d.segments.size(a)!);
  let total = 0;
  for (const s of sizes) total += s;
  // The segments now are the peak's only where they add up to what was reserved there.
  if (total !== pic.reserved_bytes) return whole;
  // Long-lived: alive from an earlier step and still at this step's end (an earlier step's outputs
  // that this one frees are per-step data), where the model keeps the end's picture.
  const end = stepPicture(d, rec, true);
  const alive = end ? new Set<number>() : null;
  if (end && alive) for (let i = 0; i < end.blocks.n; i++) alive.add(end.blocks.serial[i]!);
  const live = new Float64Array(addrs.length);
  const old = new Float64Array(addrs.length);
  const biggestOld = new Float64Array(addrs.length);
  const oldStep = new Float64Array(addrs.length).fill(Infinity);
  const b = pic.blocks;
  let largestOld = 0;
  let shared = 0;
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
    if (b.step[i] === rec.step && b.size[i]! < MIN_LARGE_ALLOC && b.size[i]! > shared) shared = b.size[i]!;
    // (a block a seed or snapshot set carries no step: from before the recording, long-lived)
    const earlier = b.step[i]! < rec.step || b.step[i] === RESYNCED_STEP;
    if (earlier && (!alive || alive.has(b.serial[i]!))) {
      old[k]! += b.size[i]!;
      if (b.size[i]! > largestOld) largestOld = b.size[i]!;
      if (b.size[i]! > biggestOld[k]!) biggestOld[k] = b.size[i]!;
      if (b.step[i] !== RESYNCED_STEP && b.step[i]! < oldStep[k]!) oldStep[k] = b.step[i]!;
    }
  }
  const longLivedSegment = segmentSizeFor(largestOld);
  const r: AllocatorReserve = { held_bytes: 0, stranded: { segments: 0, segment_bytes: 0, per_step_bytes: 0, long_lived_bytes: 0, largest_segment_bytes: 0 }, spare: [], stranded_largest_block_bytes: 0, first: null, shared_block_bytes: 0, released_bytes: 0, exact: true, slack_bytes: slack };
  let madeIn = Infinity;
  const spare: number[] = [];
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
      if (biggestOld[k]! > r.stranded_largest_block_bytes) r.stranded_largest_block_bytes = biggestOld[k]!;
      if (oldStep[k]! < madeIn) madeIn = oldStep[k]!;
    } else {
      r.held_bytes += size - live[k]!;
      // No per-step block in it at the peak, and made for one: larger than its long-lived blocks need
      // and than the allocator's shared buffer for small requests (whose request it does not tell).
      if (live[k] === old[k] && size > LARGE_BUFFER && size > segmentSizeFor(biggestOld[k]!)) spare.push(k);
    }
  }
  if (r.stranded.segments > 0) {
    // Only spare segments smaller than the stranded ones are a better fit for their long-lived blocks.
    for (const k of spare) if (sizes[k]! < r.stranded.largest_segment_bytes) r.spare.push({ size: sizes[k]!, long_lived_bytes: old[k]! });
    // Read only where it decides something (a spare segment to move to).
    const first = r.spare.length > 0 && Number.isFinite(madeIn) ? d.steps.find((s) => s.step === madeIn && !s.partial) : undefined;
    if (first) {
      const end = Number.isFinite(first.reserved_at_end) ? Math.max(first.reserved_at_end, first.reserved_at_peak) : first.reserved_at_peak;
      r.first = { step: first.step, peak_bytes: first.peak_allocated, reserved_bytes: first.reserved_at_peak, end_reserved_bytes: end };
      r.shared_block_bytes = shared;
    }
  }
  return r;
}
