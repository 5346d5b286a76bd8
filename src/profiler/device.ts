// The state of one device of one process, fed event by event. Everything per event is arithmetic
// on numbers and typed arrays plus one Map operation keyed by address; work that walks many blocks
// happens at phase and step boundaries (amortized over the events of the phase) or in queries.

import { PHASE } from "../ffi/events";
import { BlockTable, blockSize, RESYNCED, RESYNCED_STEP, type TensorInfo } from "./blocks";
import {
  CATEGORIES,
  CAT_GRADIENT,
  CAT_OTHER,
  CAT_TEMPORARY,
  CAT_UNRESOLVED,
  survivorCategory,
  type CategoryName,
} from "./categories";
import { Lifetimes } from "./lifetimes";
import { Consistency, type DetailAtSync, type SyncPoint } from "./consistency";
import { SegmentTable } from "./segment-table";
import { StepRecord, type RangeStats } from "./steps";
import { Timeline } from "./timeline";

/** How many finished steps a device keeps (older ones are dropped; the growth detector needs ~dozens). */
export const MAX_STEPS = 512;
/** How many recent finished steps keep their per-range breakdown. */
export const RANGE_DETAIL_STEPS = 64;
/** How many OOM incidents a device keeps (the first ones: later ones are usually the same story). */
export const MAX_OOMS = 16;


/** A segment as a PyTorch snapshot lists it (frames and other fields ignored). */
export interface SnapshotSegment {
  address: number;
  total_size: number;
  stream?: number;
  device?: number;
  blocks?: Array<{ address: number; size: number; state: string }>;
}

export interface OomIncident {
  time_us: number;
  step: number;
  phase: number;
  range: number;
  request_bytes: number;
  device_free_bytes: number;
  allocated_bytes: number;
  reserved_bytes: number;
  active_bytes: number;
  largest_free_block_bytes: number;
  live_by_category_bytes: Float64Array;
  nvml_used_bytes: number | null;
}

export class DeviceState {
  readonly blocks = new BlockTable();
  readonly timeline = new Timeline();
  allocated = 0;
  /** Live bytes as the program asked for them (the trace's sizes): torch's requested_bytes. */
  requested = 0;
  reserved = 0;
  active = 0;
  peakAllocated = 0;
  peakReserved = 0;
  peakActive = 0;
  nAlloc = 0;
  nFree = 0;
  nSegmentAlloc = 0;
  nSegmentFree = 0;
  nOom = 0;
  /** Live bytes allocated during the running step, by phase and by range (for shares of its peak). */
  readonly liveStepByPhase = new Float64Array(4);
  liveStepByRange = new Float64Array(64);
  readonly segments = new SegmentTable();
  private readonly lifetimes = new Lifetimes(this.blocks);

  /** Changes whenever a block, a segment or a category changes: a key for queries' caches. */
  get version(): number {
    return this.blocks.changes + this.segments.changes + this.lifetimes.changes;
  }

  // Where the training loop is (from the records' stamps).
  step = 0;
  phase = 0;
  range = 0;
  /** Counts phase instances (a phase entered, or a step begun); the step's peak remembers which. */
  phaseInst = 0;
  /** Serial of the last block allocated before the running phase instance / range instance began. */
  phaseStartSerial = 0;
  rangeStartSerial = 0;
  phaseStart_us = NaN;
  serial = 0;
  lastTime_us = NaN;
  firstTime_us = NaN;

  readonly steps: StepRecord[] = [];
  cur: StepRecord;
  private curRange: RangeStats | null = null;

  /** Gradient bytes alive at the last step boundary and not freed since (see StepRecord.gradHeldBytes). */
  carryGrad = 0;
  carryGradN = 0;
  readonly ooms: OomIncident[] = [];

  /** Frees of blocks the model never saw allocated (attach after, or lost records). */
  unknownFrees = 0;
  unknownFreeBytes = 0;
  /** Allocs at an address the model still held live (its free was lost). */
  replacedBlocks = 0;
  /** Records lost while feeding this device (from the reader's lap count). */
  lost = 0;
  /** Block detail against torch's own figures at sync records. */
  readonly consistency = new Consistency();

  // NVML's view of this process on this device.
  nvmlUsed: number | null = null;
  nvmlTime_us = NaN;
  nvmlPid: number | null = null;

  constructor(
    readonly device: number,
    step = 0,
    phase = 0,
    range = 0,
  ) {
    this.step = step;
    this.phase = phase;
    this.range = range;
    this.cur = new StepRecord(step, NaN, 0, 0);
    this.cur.phEntries[phase]!++;
  }

  /** The records' stamps changed: a step boundary, a phase change or a range change. */
  sync(t: number, step: number, phase: number, range: number): void {
    if (step !== this.step) this.stepChange(t, step, phase, range);
    else {
      if (phase !== this.phase) this.phaseChange(t, phase);
      if (range !== this.range) this.rangeChange(range);
    }
  }

  /** The device's first event (the model calls this once): the first step's start time. */
  begin(t: number): void {
    const old = this.cur;
    this.cur = new StepRecord(old.step, t, this.allocated, this.reserved);
    this.cur.phEntries[this.phase]!++;
    this.phaseStart_us = t;
    this.firstTime_us = t;
    if (this.phase === PHASE.forward) this.lifetimes.forward(this.serial, this.step);
    this.curRange = this.range !== 0 ? this.cur.rangeStats(this.range) : null;
    if (this.curRange) this.curRange.entries++;
  }

  alloc(t: number, address: number, requested: number, stream: number): void {
    const size = blockSize(requested);
    this.requested += requested;
    const blocks = this.blocks;
    const serial = ++this.serial;
    const slot = blocks.add(address, size, stream, t, serial, this.step, this.range, this.phase, CAT_UNRESOLVED, 0);
    const old = blocks.displaced;
    if (old >= 0) {
      // Its free was lost (ring lapped): it was freed, or the allocator could not hand the address out again.
      const oldSize = blocks.size[old]!;
      this.allocated -= oldSize;
      this.active -= oldSize;
      this.drop(old);
      blocks.discard(old);
      this.replacedBlocks++;
    }
    if (this.range >= this.liveStepByRange.length) this.growRanges(this.range);
    this.liveStepByRange[this.range]! += size;
    this.liveStepByPhase[this.phase]! += size;
    this.lifetimes.pend(slot, serial);

    const allocated = (this.allocated += size);
    this.active += size;
    if (allocated > this.peakAllocated) this.peakAllocated = allocated;
    if (this.active > this.peakActive) this.peakActive = this.active;
    this.nAlloc++;

    const cur = this.cur;
    const ph = this.phase;
    cur.alloc_bytes += size;
    cur.n_alloc++;
    cur.phAlloc[ph]! += size;
    cur.phNAlloc[ph]!++;
    if (allocated > cur.phPeak[ph]!) cur.phPeak[ph] = allocated;
    if (allocated > cur.peak_allocated) this.newStepPeak(t, allocated, serial);
    const rs = this.curRange;
    if (rs !== null) {
      rs.alloc_bytes += size;
      rs.n_alloc++;
      if (allocated > rs.peak_allocated_bytes) rs.peak_allocated_bytes = allocated;
    }
    this.timeline.observe(t, allocated, this.reserved);
    this.lastTime_us = t;
  }

  private newStepPeak(t: number, allocated: number, serial: number): void {
    const cur = this.cur;
    cur.peak_allocated = allocated;
    cur.peak_time_us = t;
    cur.peak_phase = this.phase;
    cur.peak_range = this.range;
    cur.peakComp.set(this.blocks.bytesByCat);
    cur.peakByPhase.set(this.liveStepByPhase);
    if (cur.peakByRange.length !== this.liveStepByRange.length)
      cur.peakByRange = new Float64Array(this.liveStepByRange.length);
    cur.peakByRange.set(this.liveStepByRange);
    cur.peakPhaseInst = this.phaseInst;
    cur.peakSerial = serial;
    cur.peakTemp = 0;
    cur.peakResolved = false;
  }

  freeRequested(t: number, address: number, requested: number): void {
    this.requested -= requested;
    const slot = this.blocks.remove(address);
    // The block's own size where the model holds it: a free's requested size may differ by rounding.
    const size = slot >= 0 ? this.blocks.size[slot]! : blockSize(requested);
    const allocated = (this.allocated -= size);
    this.nFree++;
    const cur = this.cur;
    const ph = this.phase;
    cur.freed_bytes += size;
    cur.n_free++;
    cur.phFreed[ph]! += size;
    const rs = this.curRange;
    if (rs !== null) rs.freed_bytes += size;
    if (slot >= 0) {
      const b = this.blocks;
      if (b.serial[slot]! > this.phaseStartSerial) {
        cur.phFreedWithin[ph]! += b.size[slot]!;
        if (
          cur.peakPhaseInst === this.phaseInst &&
          b.category[slot] === CAT_UNRESOLVED &&
          b.serial[slot]! <= cur.peakSerial
        )
          cur.peakTemp += b.size[slot]!;
      }
      if (rs !== null && b.serial[slot]! > this.rangeStartSerial) rs.freed_within_bytes += b.size[slot]!;
      this.drop(slot);
      b.discard(slot);
    } else {
      this.unknownFrees++;
      this.unknownFreeBytes += size;
      cur.partial = true;
    }
    this.timeline.observe(t, allocated, this.reserved);
    this.lastTime_us = t;
  }

  /** A live block leaves: out of the running step's figures (the caller discards it from the table). */
  private drop(slot: number): void {
    const b = this.blocks;
    const size = b.size[slot]!;
    const cat = b.category[slot]!;
    if (b.step[slot] === this.step) {
      this.liveStepByPhase[b.phase[slot]!]! -= size;
      this.liveStepByRange[b.range[slot]!]! -= size;
    }
    if (cat === CAT_GRADIENT && b.step[slot]! < this.step && this.carryGradN > 0) {
      this.carryGrad -= size;
      this.carryGradN--;
    }
  }

  freeCompleted(t: number, requested: number): void {
    this.active -= blockSize(requested);
    this.lastTime_us = t;
  }

  /** segment_alloc (counted) or segment_map (expandable segments: pages mapped). */
  segmentAlloc(t: number, address: number, size: number, stream: number, counted: boolean): void {
    this.reserved += size;
    if (this.reserved > this.peakReserved) this.peakReserved = this.reserved;
    if (counted) this.nSegmentAlloc++;
    this.segments.add(address, size, stream, t, counted);
    this.observeSegment(t);
  }

  /** segment_free (counted), or segment_unmap (pages unmapped). */
  segmentFree(t: number, address: number, size: number, counted: boolean): void {
    this.reserved -= size;
    if (counted) this.nSegmentFree++;
    this.segments.remove(address, size, counted);
    this.observeSegment(t);
  }

  private observeSegment(t: number): void {
    this.timeline.observe(t, this.allocated, this.reserved);
    this.lastTime_us = t;
  }

  /** The category a view shows for a live block: one allocated in the running phase counts under
   *  the category it takes if it outlives the phase. */
  categoryOf(slot: number): CategoryName {
    const cat = this.blocks.category[slot]!;
    return CATEGORIES[cat === CAT_UNRESOLVED ? survivorCategory(this.phase) : cat]!;
  }

  /** Bytes of the live blocks. */
  liveBytes(): number {
    return this.blocks.liveBytes();
  }

  private detail(): DetailAtSync {
    return {
      step: this.step,
      events: this.nAlloc + this.nFree,
      blockBytes: this.liveBytes(),
      largeBlocks: this.blocks.large,
      requested: this.requested,
      unknownFreeBytes: this.unknownFreeBytes,
    };
  }

  /** A sync record: torch's figures here, compared with the blocks (see consistency.ts). */
  syncPoint(t: number, allocated: number, reserved: number, requested: number, events: number): SyncPoint | null {
    this.lastTime_us = t;
    const p = this.consistency.observe(this.detail(), t, allocated, reserved, requested, events);
    if (p !== null) this.cur.torchAllocated = allocated;
    return p;
  }

  /** A closed ring's final header, read after its last record (see Consistency.observeEnd). */
  endPoint(allocated: number, reserved: number, requested: number): SyncPoint {
    return this.consistency.observeEnd(this.detail(), this.lastTime_us, allocated, reserved, requested);
  }

  oom(t: number, request: number, deviceFree: number, largestFree: number): void {
    this.nOom++;
    this.lastTime_us = t;
    if (this.ooms.length >= MAX_OOMS) return;
    this.ooms.push({
      time_us: t,
      step: this.step,
      phase: this.phase,
      range: this.range,
      request_bytes: request,
      device_free_bytes: deviceFree,
      allocated_bytes: this.allocated,
      reserved_bytes: this.reserved,
      active_bytes: this.active,
      largest_free_block_bytes: largestFree,
      live_by_category_bytes: this.blocks.bytesByCat.slice(),
      nvml_used_bytes: this.nvmlUsed,
    });
  }

  // ---- boundaries ----

  private stepChange(t: number, step: number, phase: number, range: number): void {
    this.endPhaseInstance(t, phase);
    const cur = this.cur;
    cur.end_us = t;
    cur.allocated_at_end = this.allocated;
    cur.reserved_at_end = this.reserved;
    cur.liveByCatAtEnd.set(this.blocks.bytesByCat);
    const byRange: Array<[number, number]> = [];
    const liveByRange = this.blocks.bytesByRange;
    for (let r = 0; r < liveByRange.length; r++) {
      const v = liveByRange[r]!;
      if (v !== 0) byRange.push([r, v]);
    }
    cur.liveByRangeAtEnd = byRange;
    this.steps.push(cur);
    if (this.steps.length > MAX_STEPS) this.steps.shift();
    // Per-range detail is what grows with a big range table: only recent steps keep it.
    const aged = this.steps[this.steps.length - 1 - RANGE_DETAIL_STEPS];
    if (aged && aged.ranges.size > 0) {
      aged.ranges.clear();
      aged.peakByRange = new Float64Array(0);
      aged.rangeDetailDropped = true;
    }
    this.lifetimes.stepBoundary();
    // Every gradient alive now came from this step or earlier: count what the next steps still hold.
    this.carryGrad = this.blocks.bytesByCat[CAT_GRADIENT]!;
    this.carryGradN = this.blocks.countByCat[CAT_GRADIENT]!;

    this.liveStepByPhase.fill(0);
    this.liveStepByRange.fill(0);
    this.step = step;
    this.phase = phase;
    this.range = range;
    this.phaseInst++;
    this.phaseStartSerial = this.serial;
    this.rangeStartSerial = this.serial;
    this.phaseStart_us = t;
    this.cur = new StepRecord(step, t, this.allocated, this.reserved);
    this.cur.phEntries[phase]!++;
    this.cur.phPeak[phase] = this.allocated;
    this.curRange = range !== 0 ? this.cur.rangeStats(range) : null;
    if (this.curRange) this.curRange.entries++;
    this.enterPhase(phase);
  }

  private phaseChange(t: number, phase: number): void {
    this.endPhaseInstance(t, phase);
    this.phase = phase;
    this.phaseInst++;
    this.phaseStartSerial = this.serial;
    this.phaseStart_us = t;
    this.cur.phEntries[phase]!++;
    if (this.allocated > this.cur.phPeak[phase]!) this.cur.phPeak[phase] = this.allocated;
    this.enterPhase(phase);
  }

  private enterPhase(phase: number): void {
    if (phase === PHASE.forward) this.lifetimes.forward(this.serial, this.step);
    if (phase === PHASE.backward && this.cur.gradHeldBytes !== this.cur.gradHeldBytes) {
      this.cur.gradHeldBytes = Math.max(0, this.carryGrad);
      this.cur.gradHeldBlocks = Math.max(0, this.carryGradN);
    }
  }

  private rangeChange(range: number): void {
    this.range = range;
    this.rangeStartSerial = this.serial;
    this.curRange = range !== 0 ? this.cur.rangeStats(range) : null;
    if (this.curRange) {
      this.curRange.entries++;
      if (this.allocated > this.curRange.peak_allocated_bytes) this.curRange.peak_allocated_bytes = this.allocated;
    }
  }

  /** The running phase instance ends (`next` begins): its survivors get their category, the step
   *  its figures for the phase. */
  private endPhaseInstance(t: number, next: number): void {
    const v = this.lifetimes.endPhase(this.phase, next);
    const cur = this.cur;
    cur.phAllocatedAtEnd[this.phase] = this.allocated;
    if (this.phaseStart_us === this.phaseStart_us) cur.phDuration[this.phase]! += t - this.phaseStart_us;
    if (cur.peakPhaseInst === this.phaseInst && !cur.peakResolved)
      this.resolvePeak(v.promoted, v.bytes + v.otherBytes > 0 ? v.bytes / (v.bytes + v.otherBytes) : 1);
  }

  /** Split the bytes that were unresolved at the step's peak into temporaries and survivors
   *  (survivors as the phase's survivors split: `share` of them in `promoted`, the rest other). */
  resolvePeak(promoted: number, share = 1): void {
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

  /** Give a live block the agent's category (cat < 0: a name only, the lifetime category stays). */
  setCategory(slot: number, cat: number, name: string | undefined, info?: TensorInfo): void {
    this.lifetimes.name(slot, cat, name, info);
  }

  /** A block the agent names but the model never saw allocated (records were lost): add it. */
  insertResynced(address: number, size: number, cat: number, name: string | undefined, t: number): number {
    const slot = this.blocks.add(address, size, 0, t, 0, RESYNCED_STEP, 0, PHASE.other, cat, RESYNCED);
    this.blocks.names[slot] = name;
    return slot;
  }

  /**
   * Replace block detail with a snapshot's segments (torch.cuda.memory._snapshot()["segments"] of
   * this device): blocks the model holds at the same address and size keep their phase, step and
   * category; blocks the snapshot lacks go; blocks only the snapshot has are added. Afterwards the
   * detail is whole again (the loss counters restart).
   */
  resync(segments: ReadonlyArray<SnapshotSegment>, t: number): { kept: number; added: number; dropped: number } {
    const want = new Map<number, number>();
    let active = 0;
    const reserved = this.segments.replace(segments.map((g) => ({ address: g.address, size: g.total_size, stream: g.stream ?? 0 })));
    for (const seg of segments)
      for (const b of seg.blocks ?? []) {
        if (b.state === "active_allocated") want.set(b.address, b.size);
        if (b.state === "active_allocated" || b.state === "active_awaiting_free") active += b.size;
      }
    const b = this.blocks;
    let kept = 0;
    let dropped = 0;
    for (const slot of b.bySlot.values()) {
      const size = want.get(b.address[slot]!);
      if (size === b.size[slot]) {
        want.delete(b.address[slot]!);
        kept++;
      } else {
        this.drop(slot);
        b.forget(slot);
        dropped++;
      }
    }
    for (const [address, size] of want) this.insertResynced(address, size, CAT_OTHER, undefined, t);
    this.allocated = b.liveBytes();
    this.reserved = reserved;
    this.active = active;
    this.lost = 0;
    this.unknownFrees = 0;
    this.unknownFreeBytes = 0;
    this.replacedBlocks = 0;
    b.clearResynced();
    this.consistency.restart();
    return { kept, added: want.size, dropped };
  }

  /** Exact totals from the ring header replace the event-derived ones (after lost records). */
  anchor(allocated: number, reserved: number, active: number): void {
    this.allocated = allocated;
    this.reserved = reserved;
    this.active = active;
  }

  private growRanges(range: number): void {
    let n = this.liveStepByRange.length;
    while (n <= range) n *= 2;
    const s = new Float64Array(n);
    s.set(this.liveStepByRange);
    this.liveStepByRange = s;
  }
}
