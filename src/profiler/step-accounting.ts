// Step accounting of one device: the running step's record (per phase and per range: allocated,
// freed, temporaries, peaks; the step's peak and what made it up), the finished steps kept, and
// what outlives a step (gradients held into the next). Fed by DeviceState's runs of allocator
// records and at the loop's boundaries; queries read `cur` and `kept`.

import { grownToHold, type BlockTable } from "./blocks";
import { CAT_GRADIENT, CAT_OTHER, CAT_TEMPORARY, CAT_UNRESOLVED, N_CAT } from "./categories";
import type { PhaseVerdict } from "./lifetimes";
import { N_PHASE, StepRecord, type RangeStats } from "./steps";
import { PHASE } from "../ffi/events";

/** How many finished steps a device keeps (older ones are dropped; the growth detector needs ~dozens). */
export const MAX_STEPS = 512;
/** How many recent finished steps keep their per-range breakdown. */
export const RANGE_DETAIL_STEPS = 64;

export class StepAccounting {
  /** Finished steps, oldest first (at most MAX_STEPS). */
  readonly kept: StepRecord[] = [];
  /** The running step. */
  cur: StepRecord;
  /** When the running phase instance began. */
  phaseStart_us = NaN;
  private curRange: RangeStats | null = null;
  /** Counts phase instances (a phase entered, or a step begun); the step's peak remembers which. */
  phaseInst = 0;
  /** Serial of the last block allocated before the running phase instance / range instance began. */
  phaseStartSerial = 0;
  rangeStartSerial = 0;
  /** Live bytes allocated during the running step, by phase and by range (for shares of its peak). */
  readonly liveByPhase = new Float64Array(N_PHASE);
  liveByRange = new Float64Array(64);
  /** One past the highest range id allocated in: liveByRange is zero from here on, so a new peak
   *  (some 6% of the records of a real ring) copies no more of it than that. */
  private rangeEnd = 1;
  /** Gradient bytes alive at the last step boundary and not freed since (see StepRecord.gradHeldBytes). */
  private carryGrad = 0;
  private carryGradN = 0;
  /** carryGrad as the step began, before any of it was freed. */
  private carriedGrad = 0;
  /** The most gradient bytes alive at the end of a backward phase so far (StepRecord.gradSetBytes). */
  private gradSet = 0;

  constructor(
    private readonly blocks: BlockTable,
    step: number,
    phase: number,
  ) {
    this.cur = new StepRecord(step, NaN, 0, 0);
    this.cur.phEntries[phase]!++;
  }

  /** The device's first event: the first step starts here. */
  begin(t: number, phase: number, range: number, allocated: number, reserved: number): void {
    this.cur = new StepRecord(this.cur.step, t, allocated, reserved);
    this.cur.phEntries[phase]!++;
    this.phaseStart_us = t;
    this.curRange = range !== 0 ? this.cur.rangeStats(range) : null;
    if (this.curRange) this.curRange.entries++;
  }

  // The open run (DeviceState.allocatorRecords: records that one step, phase and range cover):
  // what each record adds to the step's figures for that phase and range is summed in the run's
  // locals and handed over once, at closeRun; what it reads (the phase's and range's start, the
  // live sums) it reads from these fields: no method call and no field's load and store per
  // record (with the pending blocks and free slots likewise, some 4% of the model's ingest:
  // bench/results/ingest-ring-exact-blocks).
  private runPhase = 0;
  private runRange = 0;
  /** A peak's sums (peakComp, peakByPhase, peakByRange) not yet copied: until allocated next
   *  drops (a free, known or not, or a replaced block), nothing but allocs that rise above it
   *  changes them, so they are copied once, there (copyPeak, or at the run's end), instead of at
   *  every alloc that rises. The run's loop is where a step's peak rises (it writes the step
   *  record's peak and sets this). */
  peakOpen = false;

  /** A run of allocator records begins in `phase` and `range`. */
  openRun(phase: number, range: number): void {
    this.runPhase = phase;
    this.runRange = range;
    if (range >= this.rangeEnd) {
      this.rangeEnd = range + 1;
      if (range >= this.liveByRange.length) this.liveByRange = grownToHold(this.liveByRange, range);
    }
  }

  /** The open run ends: its sums join the step record (and a peak's sums are copied). `live`:
   *  bytes its allocs made that no free of the run took back yet. */
  closeRun(alloc: number, nAlloc: number, largest: number, peak: number, freed: number, nFree: number, freedWithin: number, rangeFreedWithin: number, live: number): void {
    if (this.peakOpen) this.copyPeak(live);
    else this.flushLive(live);
    const cur = this.cur;
    const phase = this.runPhase;
    if (nAlloc > 0) {
      cur.alloc_bytes += alloc;
      cur.n_alloc += nAlloc;
      cur.phAlloc[phase]! += alloc;
      cur.phNAlloc[phase]! += nAlloc;
      if (largest > cur.largest_alloc_bytes) cur.largest_alloc_bytes = largest;
      if (peak > cur.phPeak[phase]!) cur.phPeak[phase] = peak;
    }
    if (nFree > 0) {
      cur.freed_bytes += freed;
      cur.n_free += nFree;
      cur.phFreed[phase]! += freed;
      cur.phFreedWithin[phase]! += freedWithin;
    }
    const rs = this.curRange;
    if (rs !== null) {
      rs.alloc_bytes += alloc;
      rs.n_alloc += nAlloc;
      if (peak > rs.peak_allocated_bytes) rs.peak_allocated_bytes = peak;
      rs.freed_bytes += freed;
      rs.freed_within_bytes += rangeFreedWithin;
    }
  }

  /** Bytes `live` the open run allocated join the step's live sums by phase and range. */
  private flushLive(live: number): void {
    if (live === 0) return;
    this.liveByPhase[this.runPhase]! += live;
    this.liveByRange[this.runRange]! += live;
  }

  /** The sums at the peak (see peakOpen): the blocks' bytes by category as they stand, the step's
   *  by phase and range with the run's allocs in (`live`: the open run's, not yet in them). */
  copyPeak(live: number): void {
    this.peakOpen = false;
    this.flushLive(live);
    const cur = this.cur;
    copyInto(cur.peakComp, this.blocks.bytesByCat, N_CAT);
    copyInto(cur.peakByPhase, this.liveByPhase, N_PHASE);
    // A fresh array is zero throughout; one reused within the step is zero from rangeEnd on.
    if (cur.peakByRange.length !== this.liveByRange.length) cur.peakByRange = new Float64Array(this.liveByRange.length);
    copyInto(cur.peakByRange, this.liveByRange, this.rangeEnd);
  }

  /** A live block leaves (replaced, or dropped by a resync; outside an open run, or with its live
   *  bytes handed over: copyPeak) while `step` runs. Before the caller takes it out of the
   *  blocks' sums. A run's free does the same in its loop (DeviceState.allocatorRecords). */
  drop(slot: number, step: number): void {
    if (this.peakOpen) this.copyPeak(0);
    const b = this.blocks;
    const size = b.size[slot]!;
    if (b.step[slot] === step) {
      this.liveByPhase[b.phase[slot]!]! -= size;
      this.liveByRange[b.range[slot]!]! -= size;
    }
    if (b.category[slot] === CAT_GRADIENT && b.step[slot]! < step) this.dropCarried(size);
  }

  /** A gradient of `size` from an earlier step left: what the step holds of those carried drops. */
  dropCarried(size: number): void {
    if (this.carryGradN > 0) {
      this.carryGrad -= size;
      this.carryGradN--;
    }
  }

  /** The running phase instance (`phase`) ends: its figures, and the peak's split once its
   *  survivors' category is known (`v`, from Lifetimes.endPhase). */
  endPhase(t: number, phase: number, allocated: number, v: PhaseVerdict): void {
    const cur = this.cur;
    cur.phAllocatedAtEnd[phase] = allocated;
    if (phase === PHASE.backward) this.gradSet = Math.max(this.gradSet, this.blocks.bytesByCat[CAT_GRADIENT]!);
    if (this.phaseStart_us === this.phaseStart_us) cur.phDuration[phase]! += t - this.phaseStart_us;
    if (cur.peakPhaseInst === this.phaseInst && !cur.peakResolved)
      this.resolvePeak(v.promoted, v.bytes + v.otherBytes > 0 ? v.bytes / (v.bytes + v.otherBytes) : 1);
  }

  /** Split the bytes that were unresolved at the step's peak into temporaries and survivors
   *  (survivors as the phase's survivors split: `share` of them in `promoted`, the rest other). */
  private resolvePeak(promoted: number, share: number): void {
    const cur = this.cur;
    const unresolved = cur.peakComp[CAT_UNRESOLVED]!;
    const temp = Math.min(cur.peakTemp, unresolved);
    const survived = unresolved - temp;
    const main = Math.round(survived * share);
    cur.peakComp[CAT_UNRESOLVED] = 0;
    cur.peakComp[CAT_TEMPORARY]! += temp;
    cur.peakComp[promoted]! += main;
    cur.peakComp[CAT_OTHER]! += survived - main;
    cur.peakResolved = true;
  }

  /** The composition at the running step's peak as it stands now (for queries mid-phase). */
  provisionalPeakComp(): Float64Array {
    const cur = this.cur;
    const comp = cur.peakComp.slice();
    if (!cur.peakResolved) {
      const unresolved = comp[CAT_UNRESOLVED]!;
      const temp = Math.min(cur.peakTemp, unresolved);
      comp[CAT_UNRESOLVED] = unresolved - temp;
      comp[CAT_TEMPORARY]! += temp;
    }
    return comp;
  }

  /** The running step ends (its last phase already ended): kept, with what it held at its end. */
  endStep(t: number, allocated: number, reserved: number): void {
    const cur = this.cur;
    cur.end_us = t;
    cur.allocated_at_end = allocated;
    cur.reserved_at_end = reserved;
    cur.liveByCatAtEnd.set(this.blocks.bytesByCat);
    const byRange: Array<[number, number]> = [];
    const live = this.blocks.bytesByRange;
    for (let r = 0; r < live.length; r++) if (live[r]! !== 0) byRange.push([r, live[r]!]);
    cur.liveByRangeAtEnd = byRange;
    this.kept.push(cur);
    if (this.kept.length > MAX_STEPS) this.kept.shift();
    // Per-range detail is what grows with a big range table: only recent steps keep it.
    const aged = this.kept[this.kept.length - 1 - RANGE_DETAIL_STEPS];
    if (aged && aged.ranges.size > 0) {
      aged.ranges.clear();
      aged.peakByRange = new Float64Array(0);
      aged.rangeDetailDropped = true;
    }
  }

  /** A new step begins in `phase` and `range` (`serial`: the last block allocated before it). Every
   *  gradient alive now came from earlier steps: what the next steps still hold of them is counted. */
  beginStep(t: number, step: number, phase: number, range: number, serial: number, allocated: number, reserved: number): void {
    this.carryGrad = this.blocks.bytesByCat[CAT_GRADIENT]!;
    this.carryGradN = this.blocks.countByCat[CAT_GRADIENT]!;
    this.carriedGrad = this.carryGrad;
    this.liveByPhase.fill(0);
    this.liveByRange.fill(0);
    this.phaseInst++;
    this.phaseStartSerial = serial;
    this.rangeStartSerial = serial;
    this.phaseStart_us = t;
    this.cur = new StepRecord(step, t, allocated, reserved);
    this.cur.phEntries[phase]!++;
    this.cur.phPeak[phase] = allocated;
    this.curRange = range !== 0 ? this.cur.rangeStats(range) : null;
    if (this.curRange) this.curRange.entries++;
    this.enterPhase(phase);
  }

  /** A new phase instance begins within the step. */
  beginPhase(t: number, phase: number, serial: number, allocated: number): void {
    this.phaseInst++;
    this.phaseStartSerial = serial;
    this.phaseStart_us = t;
    this.cur.phEntries[phase]!++;
    if (allocated > this.cur.phPeak[phase]!) this.cur.phPeak[phase] = allocated;
    this.enterPhase(phase);
  }

  private enterPhase(phase: number): void {
    if (phase === PHASE.backward && this.cur.gradHeldBytes !== this.cur.gradHeldBytes) {
      this.cur.gradHeldBytes = Math.max(0, this.carryGrad);
      this.cur.gradHeldBlocks = Math.max(0, this.carryGradN);
      this.cur.gradCarriedBytes = this.carriedGrad;
      this.cur.gradSetBytes = this.gradSet;
    }
  }

  /** The innermost record_function range changed. */
  beginRange(range: number, serial: number, allocated: number): void {
    this.rangeStartSerial = serial;
    this.curRange = range !== 0 ? this.cur.rangeStats(range) : null;
    if (this.curRange) {
      this.curRange.entries++;
      if (allocated > this.curRange.peak_allocated_bytes) this.curRange.peak_allocated_bytes = allocated;
    }
  }
}

/** A plain loop: every allocation that raises a step's peak copies these few-element arrays, and
 *  TypedArray.set's fixed cost is several times the copy at this size (a tenth of a busy session). */
function copyInto(dst: Float64Array, src: Float64Array, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = src[i]!;
}
