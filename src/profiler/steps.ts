// What the model keeps per training step: per phase and per record_function range, bytes allocated
// during it, freed during it, freed within it (temporaries), the peak within it, what it still held
// at its end; the step's peak with the composition of live memory at that moment; and the live
// memory by category and by range at the step boundary (the growth detector reads those).

import { PHASE_NAMES } from "../ffi/events";
import { N_CAT } from "./categories";

export const N_PHASE = PHASE_NAMES.length;

/** Stats of one record_function range (innermost) within one step. */
export interface RangeStats {
  alloc_bytes: number;
  freed_bytes: number;
  /** Freed while the same range instance was still the innermost one. */
  freed_within_bytes: number;
  peak_allocated_bytes: number;
  n_alloc: number;
  entries: number;
}

export class StepRecord {
  end_us = NaN;
  allocated_at_end = NaN;
  /** torch's own memory_allocated() at the step's last sync record (NaN where none came). */
  torchAllocated = NaN;
  /** torch's own requested bytes (memory_stats requested_bytes) at the same sync record. */
  torchRequested = NaN;
  /** The model's allocated bytes at that sync record: the figure compared with torchAllocated. */
  heldAtSync = NaN;
  /** The device's alloc and free_requested records at that sync record and at the step's end:
   *  equal where the sync is the step's boundary (no block allocated or freed after it). */
  eventsAtSync = NaN;
  eventsAtEnd = NaN;

  /** torch's figure at the step's boundary, where a sync record lies there (NaN otherwise). */
  get torchAtEnd(): number {
    return this.eventsAtSync === this.eventsAtEnd ? this.torchAllocated : NaN;
  }

  /** What the step held at its end: at its boundary's sync record where it has one (the point
   *  torch's own figure was read), else at the boundary. */
  get heldAtEnd(): number {
    return this.eventsAtSync === this.eventsAtEnd ? this.heldAtSync : this.allocated_at_end;
  }
  reserved_at_end = NaN;
  alloc_bytes = 0;
  freed_bytes = 0;
  n_alloc = 0;
  n_free = 0;
  peak_allocated: number;
  /** Reserved bytes at the moment of the step's peak: reserved − peak_allocated is what the cache
   *  held beyond the step's own need at its highest (see words.ts, UNALLOCATED). */
  reserved_at_peak: number;
  /** The largest block allocated during the step (the allocator's rounded size): the most any one
   *  free block had to hold for it. */
  largest_alloc_bytes = 0;
  peak_time_us: number;
  peak_phase: number;
  peak_range: number;
  /** Live bytes by category at the step's peak (category codes; see categories.ts). */
  readonly peakComp = new Float64Array(N_CAT);
  /** Live bytes allocated during this step, by phase and by range id, at the step's peak. */
  readonly peakByPhase = new Float64Array(N_PHASE);
  peakByRange = new Float64Array(0);
  peakPhaseInst = -1;
  peakSerial = -1;
  /** Of the bytes unresolved at the peak, those freed later within the same phase instance. */
  peakTemp = 0;
  peakResolved = true;
  readonly phAlloc = new Float64Array(N_PHASE);
  readonly phFreed = new Float64Array(N_PHASE);
  readonly phFreedWithin = new Float64Array(N_PHASE);
  readonly phPeak = new Float64Array(N_PHASE).fill(-1);
  readonly phAllocatedAtEnd = new Float64Array(N_PHASE).fill(NaN);
  readonly phDuration = new Float64Array(N_PHASE);
  readonly phNAlloc = new Float64Array(N_PHASE);
  readonly phEntries = new Float64Array(N_PHASE);
  readonly ranges = new Map<number, RangeStats>();
  /** The step is old enough that its per-range detail was dropped (see RANGE_DETAIL_STEPS). */
  rangeDetailDropped = false;
  /** Live bytes by category at the step's end (boundary). */
  readonly liveByCatAtEnd = new Float64Array(N_CAT);
  /** [range id, live bytes allocated in it] at the step's end, for ranges holding anything. */
  liveByRangeAtEnd: Array<[number, number]> = [];
  /** Gradient bytes from earlier steps still alive when this step's first backward began. */
  gradHeldBytes = NaN;
  gradHeldBlocks = 0;
  /** Gradient bytes alive at the step's start (what zero_grad would free): gradHeldBytes' measure. */
  gradCarriedBytes = NaN;
  /** The most gradient bytes alive at the end of any backward so far (the model's gradient set):
   *  a few small blocks held against a set far larger are not the gradients kept. */
  gradSetBytes = NaN;
  /** Counters of lost records / unknown frees seen during the step (its numbers may be partial). */
  partial = false;

  constructor(
    readonly step: number,
    readonly start_us: number,
    readonly allocated_at_start: number,
    readonly reserved_at_start: number,
  ) {
    this.peak_allocated = allocated_at_start;
    this.reserved_at_peak = reserved_at_start;
    this.peak_time_us = start_us;
    this.peak_phase = -1;
    this.peak_range = 0;
  }

  rangeStats(range: number): RangeStats {
    let r = this.ranges.get(range);
    if (!r) {
      r = {
        alloc_bytes: 0,
        freed_bytes: 0,
        freed_within_bytes: 0,
        peak_allocated_bytes: 0,
        n_alloc: 0,
        entries: 0,
      };
      this.ranges.set(range, r);
    }
    return r;
  }
}
