// The state of one device of one process, fed event by event: its totals (allocated, reserved,
// active, peaks, counts), where the training loop is, and the parts that keep the detail: the
// block table, the segment table, step accounting, category inference (lifetimes), OOM incidents and
// consistency against torch's own figures. Everything per event is arithmetic on numbers and typed
// arrays plus one probe of the address map; the allocator's records come in runs (allocatorRecords:
// one loop for the records one set of stamps covers). Work that walks many blocks happens at phase
// and step boundaries (amortized over the events of the phase) or in queries. Readers use the
// getters (the totals' own in device-totals.ts, which this extends).

import { ACTION, PHASE, type EventBatch } from "../ffi/events";
import { BlockTable, LARGE, RESYNCED } from "./blocks";
import { FreedLarge } from "./freed-large";
import { TotalsReadout } from "./device-totals";
import { CATEGORIES, CAT_GRADIENT, CAT_TEMPORARY, CAT_UNRESOLVED, survivorCategory, type CategoryName } from "./categories";
import { Consistency, type DetailAtSync, type SyncPoint } from "./consistency";
import { Lifetimes } from "./lifetimes";
import { nameBlocks, type Named, type NamedTensor } from "./name-blocks";
import { OomLog, type OomIncident } from "./oom";
import type { LineSums } from "./line-bytes";
import { privatePoolsOf, privatePoolsOfSegments, type PrivatePool } from "./pools";
import { resyncFromSegments, type SnapshotSegment } from "./resync";
import { seedBlocks, type SeedSegment, type Seeded } from "./seed";
import { SegmentTable } from "./segment-table";
import { StepAccounting } from "./step-accounting";
import type { StepRecord } from "./steps";
import { PeakWitness } from "./at-peak";
import { Timeline } from "./timeline";
import { PhaseHistory } from "./phase-history";
import { blockSize, ruleRow } from "./totals";
import { blockFrom, DEFAULT_RULES, roundSize, SMALL_BUFFER, SMALL_SIZE, type AllocatorRules } from "./block-sizes";
import { CHAIN_FREE, CHAIN_LIVE, CHAIN_UNKNOWN, LargePoolLayout, type SeedBlock } from "./large-pool";
import { DEAD, hash } from "./address-map";

export type { SnapshotSegment } from "./resync";

/** New blocks one run of allocator records may make (allocatorRecords): the block table makes room
 *  for them first, so the run keeps the columns it read; a run that needs more stops there. */
const RUN_ROOM = 1024;

/** Why allocatorRecords' loop was left (a const enum: written in as numbers, no scope lookup). */
const enum Left {
  /** The run's end (or its last record, nothing to do after it). */
  RUN_END,
  /** After a whole record, for what `todo` says (or a last record with something to do). */
  WHOLE,
  /** Before a free, its record untouched: the step's peak's sums are copied first. */
  COPY_PEAK,
  /** Before a free that is logged, untouched: the log of frees is full. */
  LOG_FULL,
  /** Before an alloc at an address still live, untouched: the block there goes first. */
  REPLACED,
}

/** What is done once a record is whole (bits of allocatorRecords' `todo`). */
const enum Todo {
  /** The block table's address map passed half full: rebuilt. */
  MAP_FULL = 1,
  /** The large pool's index passed half full, or its entries outnumber its blocks too far. */
  CHAIN_INDEX = 2,
  /** A call was made (a case the loop leaves to the layout or the block table): state read again. */
  CALLED = 4,
  /** The record fell after the timeline's open bucket: that bucket closed, the next opened. */
  BUCKET = 8,
}

export class DeviceState extends TotalsReadout {
  readonly blocks = new BlockTable();
  readonly segments = new SegmentTable();
  readonly timeline = new Timeline();
  /** Each phase's time over the last ten minutes (phase-shares.ts draws a strip of it). */
  readonly phaseHistory = new PhaseHistory();
  /** Block detail against torch's own figures at sync records. */
  readonly consistency = new Consistency();
  private readonly lifetimes = new Lifetimes(this.blocks);
  private readonly accounting: StepAccounting;
  private readonly oomLog = new OomLog();
  /** A snapshot's private pools (pools.ts), as its segments or a resync's said; null where unknown. */
  private snapshotPools: readonly PrivatePool[] | null = null;
  /** The records carry each segment's pool (the manifest's `segment_pools`): the pools come from
   *  the segment table and the live blocks, now. */
  poolsInRecords = false;
  private poolsCache: { version: number; pools: readonly PrivatePool[] } | null = null;
  /** The blocks alive at each step's peak (at-peak.ts). */
  readonly peaks = new PeakWitness(this.blocks);
  /** The newest frees of large blocks: what last held a free range (hole-lines.ts). */
  readonly freedLarge = new FreedLarge();

  // torch's block sizes (profiler/block-sizes.ts, the rules snapshots follow too): a record carries
  // the request; the allocator hands out the request rounded, and in the large pool the whole free
  // block where no more than 1 MiB would remain. So each large segment is kept as the allocator's
  // chain of blocks (large-pool.ts), from its segment_alloc or from a seed's or snapshot's blocks.
  private rules: AllocatorRules = DEFAULT_RULES;
  private layout = new LargePoolLayout(DEFAULT_RULES);
  /** Expandable segments (the settings say so, or pages were mapped): every block is cut to its
   *  request rounded, in both pools; no layout is needed. */
  private expandable = false;
  /** Whether the allocator uses expandable segments (the forecast's reserve reads segments otherwise). */
  get expandableSegments(): boolean {
    return this.expandable;
  }

  // Where the training loop is (from the records' stamps).
  private _step: number;
  private _phase: number;
  private _range: number;
  /** Serial number of the last allocation (see BlockTable.serial). */
  private serial = 0;
  private _firstTime_us = NaN;
  private _lastTime_us = NaN;

  // Why block detail may be partial.
  /** Frees of blocks the model never saw allocated (attach after, or lost records). */
  private _unknownFrees = 0;
  private _unknownFreeBytes = 0;
  /** Allocs at an address the model still held live (its free was lost). */
  private _replacedBlocks = 0;
  /** Records lost while feeding this device (from the reader's lap count). */
  private _lost = 0;

  // NVML's view of this process on this device.
  private _nvmlUsed: number | null = null;
  private _nvmlTime_us = NaN;
  private _nvmlPid: number | null = null;

  constructor(
    readonly device: number,
    step = 0,
    phase = 0,
    range = 0,
  ) {
    super();
    this._step = step;
    this._phase = phase;
    this._range = range;
    this.accounting = new StepAccounting(this.blocks, step, phase);
  }

  // ---- what readers see ----

  /** Live blocks counted at their request rounded for want of their segment's layout (each may be
   *  up to 1 MiB larger in torch): 0 when every live block has torch's size. */
  get unsizedBlocks(): number {
    return this.blocks.unsizedCount;
  }

  /** The allocator's settings (the manifest's alloc_conf). Set before the first record; later,
   *  the chains already kept stay as they are. */
  setRules(rules: AllocatorRules): void {
    if (rules === this.rules) return;
    this.rules = rules;
    if (rules.expandable) this.expandable = true;
    this.layout = new LargePoolLayout(rules);
  }

  /** The OOM incidents kept (the first MAX_OOMS). */
  get ooms(): readonly OomIncident[] {
    return this.oomLog.kept;
  }
  get step(): number {
    return this._step;
  }
  get phase(): number {
    return this._phase;
  }
  get range(): number {
    return this._range;
  }
  get firstTime_us(): number {
    return this._firstTime_us;
  }
  get lastTime_us(): number {
    return this._lastTime_us;
  }
  get unknownFrees(): number {
    return this._unknownFrees;
  }
  get unknownFreeBytes(): number {
    return this._unknownFreeBytes;
  }
  get replacedBlocks(): number {
    return this._replacedBlocks;
  }
  get lost(): number {
    return this._lost;
  }
  get nvmlUsed(): number | null {
    return this._nvmlUsed;
  }
  get nvmlTime_us(): number {
    return this._nvmlTime_us;
  }
  get nvmlPid(): number | null {
    return this._nvmlPid;
  }
  /** The running step. */
  get cur(): StepRecord {
    return this.accounting.cur;
  }
  /** Finished steps kept, oldest first. */
  get steps(): readonly StepRecord[] {
    return this.accounting.kept;
  }
  /** When the running phase instance began. */
  get phaseStart_us(): number {
    return this.accounting.phaseStart_us;
  }

  /** Changes whenever a block, a segment or a category changes: a key for queries' caches. */
  get version(): number {
    return this.blocks.changes + this.segments.changes + this.lifetimes.changes;
  }

  /** Bytes of the live blocks. */
  liveBytes(): number {
    return this.blocks.liveBytes();
  }

  /** The category a view shows for a live block: one allocated in the running phase counts under
   *  the category it takes if it outlives the phase. */
  categoryOf(slot: number): CategoryName {
    return CATEGORIES[this.categoryCode(slot)]!;
  }

  /** categoryOf's code (an arrow: passed to at-peak.ts as it is). */
  readonly categoryCode = (slot: number): number => {
    const cat = this.blocks.category[slot]!;
    return cat === CAT_UNRESOLVED ? survivorCategory(this._phase) : cat;
  };

  /** The composition at the running step's peak as it stands now (for queries mid-phase). */
  provisionalPeakComp(): Float64Array {
    return this.accounting.provisionalPeakComp();
  }

  // ---- events ----

  /** The device's first event (the model calls this once): the first step's start time. */
  begin(t: number): void {
    this._firstTime_us = t;
    this.accounting.begin(t, this._phase, this._range, this.t.allocated, this.t.reserved);
    if (this._phase === PHASE.forward) this.lifetimes.forward(this.serial, this._step);
  }

  /** The device has seen no event yet (the model begins it at its first). */
  get fresh(): boolean {
    return this._firstTime_us !== this._firstTime_us;
  }

  /** The records' stamps changed: a step boundary, a phase change or a range change. */
  sync(t: number, step: number, phase: number, range: number): void {
    if (step !== this._step) this.stepChange(t, step, phase, range);
    else {
      if (phase !== this._phase) this.phaseChange(t, phase);
      if (range !== this._range) this.rangeChange(range);
    }
  }

  /** Folded frees among the records the last allocatorRecords() took: each counts as two events. */
  foldedFrees = 0;
  /** Where allocatorRecords writes each record's block size, by the batch's index (the model's
   *  kept records, EventTail.block); null: nowhere. */
  blockOut: Float64Array | null = null;

  /**
   * The allocator's records of this device from `from` on (alloc, free_requested, free_completed,
   * and the reader's free: a free_requested and its free_completed folded into one): the one place
   * their accounting is done. The caller has checked record `from` (its device, its stamps synced);
   * the records after it are taken while they are allocator records of this device that the
   * running step, phase and range cover (`cs`, `cp`, `cr`: the stamps as the caller holds them; a
   * record stamped with an older step belongs to the running one, as in the caller) and carry a
   * range id below `maxRange`. It stops after a record stamped with a profiler line (the caller
   * records the line with the totals after it) and, with `one`, after the first record.
   * Returns the index of the first record not taken.
   *
   * One flat loop over the records: the block table's columns and the totals are read once a
   * run instead of once a record, and what every record does (the address map, the large pool's
   * chains, the step's figures, its peak, the pending blocks, the log of frees at the peak, the
   * timeline's bucket) is done in place, on typed arrays and locals, with nothing called that the
   * JIT does not write into the loop (see the loop's head).
   */
  allocatorRecords(batch: EventBatch, from: number, end: number, cs: number, cp: number, cr: number, maxRange: number, allocStacks: boolean, one: boolean): number {
    const action = batch.action;
    const deviceCol = batch.device;
    const time = batch.time_us;
    const address = batch.address;
    const sizeCol = batch.size;
    const streamCol = batch.stream;
    const stepCol = batch.step;
    const phaseCol = batch.phase;
    const rangeCol = batch.range;
    const stackCol = batch.stack;
    const extra = batch.extra;
    const lineCol = batch.line;
    const blockOut = this.blockOut;
    const dev = this.device;
    const step = this._step;
    const phase = this._phase;
    const range = this._range;
    const blocks = this.blocks;
    const map = blocks.bySlot;
    const acc = this.accounting;
    const lifetimes = this.lifetimes;
    const timeline = this.timeline;
    const peaks = this.peaks;
    const log = peaks.log;
    const freedLarge = this.freedLarge;
    const tt = this.t;
    const counts = tt.counts;
    const layout = this.expandable ? null : this.layout;
    const rules = this.rules;
    const powerTwo = rules.powerTwo;
    const maxSplit = rules.maxSplitSize;
    const RA = ruleRow(ACTION.alloc);
    const RF = ruleRow(ACTION.free_requested);
    const RC = ruleRow(ACTION.free_completed);
    // Where the rule moves no reserved bytes with these records (it does not: segments do), the
    // timeline's bucket takes the run's reserved, not followed record by record.
    const reservedMoves = RA.rs !== 0 || RF.rs !== 0 || RC.rs !== 0;
    // Room made before the loop, so that it never grows a column: the run takes at most `room`
    // new blocks (a run that needs more stops there), each alloc pends one block and cuts at most
    // one free block of the large pool.
    let room = RUN_ROOM;
    blocks.holdRange(range);
    blocks.makeRoom(room);
    lifetimes.pendRoom(room);
    layout?.makeRoom(room);
    acc.openRun(phase, range);
    const bytesByCat = blocks.bytesByCat;
    const countByCat = blocks.countByCat;
    const bytesByRange = blocks.bytesByRange;
    const names = blocks.names;
    const tensors = blocks.tensors;
    // StepAccounting's run: its sums in locals, handed over at closeRun; what it reads, read once
    const cur = acc.cur;
    const phaseStartSerial = acc.phaseStartSerial;
    const rangeStartSerial = acc.rangeStartSerial;
    const phaseInst = acc.phaseInst;
    const liveByPhase = acc.liveByPhase;
    const liveByRange = acc.liveByRange;
    let runAlloc = 0;
    let runNAlloc = 0;
    let runLargest = 0;
    let runPeak = -1;
    let runFreed = 0;
    let runNFree = 0;
    let runFreedWithin = 0;
    let runRangeFreedWithin = 0;
    /** Bytes the run allocated, not yet in liveByPhase / liveByRange (copyPeak adds them first). */
    let runLive = 0;
    let folded = 0;
    // The timeline's open finest bucket, as the run goes: the allocated and reserved bytes after
    // the records that fell in it, handed over once (Timeline.extend) rather than observed one
    // record at a time (about a tenth of a busy model's ingest on the GPU host's profile).
    let aMin = Infinity;
    let aMax = -Infinity;
    let rMin = Infinity;
    let rMax = -Infinity;
    let lastA = 0;
    let lastR = 0;
    /** A slot the block of record `i` already holds in the address map (taken where a lost free's
     *  block was put out of it, see REPLACED). */
    let preSlot = -1;
    let i = from;
    // The loop over the records calls nothing that the JIT does not write into it: a call that
    // some records make (a new free block's index entry, the timeline's next bucket, a peak's sums
    // copied, a logged free) keeps the JIT from holding the columns' storage and the run's sums
    // across the whole loop, and that cost every record (hf-gpt2's records took 58 ns each inside
    // this method with the calls in, 39 without: bench/results/ingest-ring-flat). So what needs a
    // call leaves the loop (`why`) at a point where its record is untouched or whole: the state
    // handed back, the call made, the state read again and the loop entered again. The calls left
    // inside are for cases a run whose layouts are known never meets (the layout's own alloc and
    // frees, a resynced block's discard): the JIT compiles only the cases it has seen.
    for (;;) {
      // ---- the state the loop keeps in locals, read (again) ----
      const cAddress = blocks.address;
      const cSize = blocks.size;
      const cStream = blocks.stream;
      const cTime = blocks.time_us;
      const cSerial = blocks.serial;
      const cStep = blocks.step;
      const cRange = blocks.range;
      const cPhase = blocks.phase;
      const cCat = blocks.category;
      const cFlags = blocks.flags;
      const cUnsized = blocks.unsized;
      const cChain = blocks.chain;
      const cStack = blocks.stack;
      const freeSlots = blocks.freeSlots;
      let nFree = blocks.nFree;
      let used = blocks.used;
      let changes = 0;
      const mKeys = map.keys;
      const mVals = map.vals;
      const pendSlot = lifetimes.pendSlot;
      const pendSerial = lifetimes.pendSerial;
      let pendLen = lifetimes.pendLen;
      const logSlot = log.slot;
      const logAt = log.freedAt;
      let logN = log.n;
      // the large pool's chains (LargePoolLayout), read in place: the layout is the one of the run
      const lc = layout ?? this.layout;
      const lAddr = lc.addr;
      const lSize = lc.size;
      const lKind = lc.kind;
      const lPrev = lc.prev;
      const lNext = lc.next;
      const lUnsettled = lc.unsettled;
      const lEntry = lc.entry;
      const lFreeEntry = lc.freeEntry;
      const lSpare = lc.spare;
      let lNSpare = lc.nSpare;
      let lUsed = lc.used;
      const lKeys = lc.at.keys;
      const lVals = lc.at.vals;
      let requested = tt.requested;
      let allocated = tt.allocated;
      let active = tt.active;
      let reserved = tt.reserved;
      let peakAllocated = tt.peakAllocated;
      let peakActive = tt.peakActive;
      let serial = this.serial;
      let lastTime = this._lastTime_us;
      let peakOpen = acc.peakOpen;
      // the running step's peak: its bytes, its moment (PeakWitness.peakAt: a free of a block born
      // by it is logged), and whether it lies in this phase instance
      let stepPeak = cur.peak_allocated;
      let peakAt = peaks.peakAt(cur);
      let peakSerial = cur.peakSerial;
      let peakHere = cur.peakPhaseInst === phaseInst;
      let fineEnd = timeline.fineEnd;
      // why the loop was left (RUN_END: the run's end; WHOLE: after a whole record, for `todo`
      // and `stop`; else before record i, untouched), and what to do once a record is whole
      let why: Left = Left.RUN_END;
      let todo = 0;
      let stop = false;
      for (; i < end; i++) {
        const a = action[i]!;
        if (i > from) {
          if ((a > ACTION.free_completed && a !== ACTION.free) || deviceCol[i] !== dev) break;
          const st = stepCol[i]!;
          const rg = rangeCol[i]!;
          if (rg >= maxRange || ((st !== cs || phaseCol[i] !== cp || rg !== cr) && st >= cs)) break;
        }
        const t = time[i]!;
        const rq = sizeCol[i]!;
        const rounded = powerTwo ? roundSize(rq, rules) : blockSize(rq);
        if (a === ACTION.alloc) {
          if (room === 0) break; // not the first record: room is at least one
          const addr = address[i]!;
          // AddressMap.put, its entry looked at before anything changes: an address the model
          // still holds live (its free was lost) leaves the loop (REPLACED) and comes back
          const hh = hash(addr);
          let slot = preSlot;
          if (slot < 0) {
            const h = map.position(addr, hh);
            if (mKeys[h] === addr && mVals[h]! !== DEAD) {
              why = Left.REPLACED;
              break;
            }
            slot = nFree > 0 ? freeSlots[--nFree]! : used++;
            map.putAt(h, addr, slot);
            if (map.due()) todo |= Todo.MAP_FULL; // rebuilt once the record is whole
          } else preSlot = -1;
          room--;
          const ser = ++serial;
          changes++;
          // torch's block: the small pool's (and expandable segments') is the request rounded; a
          // large one is what its segment's chain gives, where the chain is known.
          let size = rounded;
          let chain = -1;
          if (rounded > SMALL_SIZE && layout !== null) {
            // The chain's block that starts at the address (LargePoolLayout.find): a free block
            // there is handed out, whole or cut (blockFrom); anything else (no layout there, an
            // unknown stretch, a block too small) is the layout's own alloc, which a run of a
            // layout known throughout never reaches.
            const lh = lc.at.position(addr, hh);
            const v = lKeys[lh] === addr ? lVals[lh]! : -1;
            const c = v >= 0 && lKind[v] === CHAIN_FREE && lAddr[v] === addr ? v : -1;
            const f = c >= 0 ? lSize[c]! : 0;
            if (f >= rounded) {
              lKind[c] = CHAIN_LIVE;
              chain = c;
              size = blockFrom(f, rounded, maxSplit);
              if (size < f) {
                // LargePoolLayout.cutAt and add's link: the rest a free block after it, in a spare
                // slot or a new one (makeRoom made them), with its index entry
                lSize[c] = size;
                const r = lNSpare > 0 ? lSpare[--lNSpare]! : lUsed++;
                const at = addr + size;
                lAddr[r] = at;
                lSize[r] = f - size;
                lKind[r] = CHAIN_FREE;
                lUnsettled[r] = 0;
                lEntry[r] = -1;
                lFreeEntry[r] = -1;
                lPrev[r] = c;
                const n = lNext[c]!;
                lNext[r] = n;
                lNext[c] = r;
                if (n >= 0) lPrev[n] = r;
                lc.at.putAt(lc.at.position(at, hash(at)), at, r);
                if (lc.at.due() || lc.at.size > lc.reindexAt) todo |= Todo.CHAIN_INDEX;
              }
            } else if (lc.unknowns === 0) {
              // No block of the layout's to go by (a segment from before what the records hold,
              // as for a monitor that joined a running training, or one they contradict):
              // allocAt's answer, the request rounded, counted unsized, without leaving the loop
              // (in a joined follower half the records were these, each a call and a reread).
              size = rounded;
              lc.inferred++;
              cUnsized[slot] = 1;
              blocks.unsizedCount++;
            } else {
              const unknown = lc.inferred;
              lc.nSpare = lNSpare;
              lc.used = lUsed;
              size = lc.alloc(addr, rounded, NaN, -1);
              lNSpare = lc.nSpare;
              lUsed = lc.used;
              chain = lc.lastSlot;
              if (lc.inferred !== unknown) {
                cUnsized[slot] = 1;
                blocks.unsizedCount++;
              }
              todo |= Todo.CALLED; // its columns may have moved: read again once the record is whole
            }
          }
          cChain[slot] = chain;
          // BlockTable.add's columns and sums
          cAddress[slot] = addr;
          cSize[slot] = size;
          if (blockOut !== null) blockOut[i] = size;
          cStream[slot] = streamCol[i]!;
          cTime[slot] = t;
          cSerial[slot] = ser;
          cStep[slot] = step;
          cRange[slot] = range;
          cPhase[slot] = phase;
          cCat[slot] = CAT_UNRESOLVED;
          cFlags[slot] = 0;
          // a snapshot's trace gives the stack; a ring's alloc carries it in `extra`
          cStack[slot] = stackCol[i]! || (allocStacks ? extra[i]! : 0);
          if (size > LARGE) blocks.large++;
          bytesByCat[CAT_UNRESOLVED]! += size;
          countByCat[CAT_UNRESOLVED]!++;
          bytesByRange[range]! += size;
          // Lifetimes.pend: pending until its phase ends, when its category is known
          pendSlot[pendLen] = slot;
          pendSerial[pendLen++] = ser;
          requested += RA.rq * rq;
          allocated += RA.al * size;
          active += RA.ac * size;
          reserved += RA.rs * rq;
          if (allocated > peakAllocated) peakAllocated = allocated;
          if (active > peakActive) peakActive = active;
          counts[RA.count]!++;
          // the step's figures for the run's phase and range (StepAccounting's run)
          runLive += size;
          runAlloc += size;
          runNAlloc++;
          if (size > runLargest) runLargest = size;
          if (allocated > runPeak) {
            runPeak = allocated;
            if (allocated > stepPeak) {
              // The step's new peak, this alloc: its sums are copied once allocated next drops
              // (StepAccounting.copyPeak, peakOpen).
              stepPeak = allocated;
              cur.peak_allocated = allocated;
              cur.reserved_at_peak = reserved;
              cur.peak_time_us = t;
              cur.peak_phase = phase;
              cur.peak_range = range;
              cur.peakPhaseInst = phaseInst;
              cur.peakSerial = ser;
              cur.peakTemp = 0;
              cur.peakResolved = false;
              peakOpen = true;
              peakAt = ser;
              peakSerial = ser;
              peakHere = true;
            }
          }
          lastTime = t;
        } else if (a === ACTION.free_completed) {
          // the block left the table at its free_requested: its chain gives its size (it stayed in
          // place until now), else it is the request rounded
          let freed: number | undefined;
          if (rounded > SMALL_SIZE && layout !== null) {
            lc.nSpare = lNSpare;
            lc.used = lUsed;
            freed = lc.freeCompleted(address[i]!);
            lNSpare = lc.nSpare;
            lUsed = lc.used;
            // no live block of the layout's at the address (none there to go by, as for a monitor
            // that joined a running training): the call changed nothing, the loop goes on
            if (freed !== undefined) todo |= Todo.CALLED;
          }
          active += RC.ac * (freed ?? rounded);
          lastTime = t;
        } else {
          // free_requested, or the fold of one and its free_completed (at `extra`): allocated
          // drops, so a peak's sums not copied yet are copied first (COPY_PEAK, the record untouched)
          if (peakOpen) {
            why = Left.COPY_PEAK;
            break;
          }
          const addr = address[i]!;
          // AddressMap.remove, its entry looked at before anything changes (LOG_FULL)
          const h = map.position(addr, hash(addr));
          const slot = mKeys[h] === addr ? mVals[h]! : -1;
          // A block born by the running step's peak keeps its slot for the log of frees
          // (PeakWitness): where the log is full, it is trimmed or grown first (makeRoom).
          const born = slot >= 0 ? cSerial[slot]! : Infinity;
          const logged = born <= peakAt;
          if (logged && logN === logSlot.length) {
            why = Left.LOG_FULL;
            break;
          }
          if (slot >= 0) map.removeAt(h);
          // The block's own size where the model holds it: a free's requested size may differ by
          // rounding.
          const size = slot >= 0 ? cSize[slot]! : rounded;
          if (blockOut !== null) blockOut[i] = size;
          requested += RF.rq * rq;
          allocated += RF.al * size;
          active += RF.ac * size;
          reserved += RF.rs * rq;
          counts[RF.count]!++;
          // the step's frees (StepAccounting's run)
          runFreed += size;
          runNFree++;
          const chain = slot >= 0 ? cChain[slot]! : -1;
          if (slot >= 0) {
            if (size > LARGE) freedLarge.push(addr, size, cStack[slot]!);
            // within the phase, at its peak's temporaries, within the range
            if (born > phaseStartSerial) {
              runFreedWithin += size;
              if (peakHere && cCat[slot] === CAT_UNRESOLVED && born <= peakSerial) cur.peakTemp += size;
            }
            if (born > rangeStartSerial) runRangeFreedWithin += size;
            // then it leaves the step's live sums (StepAccounting.drop)
            const bornStep = cStep[slot]!;
            if (bornStep === step) {
              liveByPhase[cPhase[slot]!]! -= size;
              liveByRange[cRange[slot]!]! -= size;
            } else if (bornStep < step && cCat[slot] === CAT_GRADIENT) acc.dropCarried(size);
            // BlockTable.discard (a resynced block's own way apart)
            if (cFlags[slot] === RESYNCED) {
              blocks.nFree = nFree;
              blocks.discard(slot, logged);
              nFree = blocks.nFree;
              todo |= Todo.CALLED;
            } else {
              const cat = cCat[slot]!;
              bytesByCat[cat]! -= size;
              countByCat[cat]!--;
              if (size > LARGE) blocks.large--;
              bytesByRange[cRange[slot]!]! -= size;
              if (cUnsized[slot] === 1) blocks.settleSize(slot);
              changes++;
              if (!logged) {
                // BlockTable.release: most blocks were never named
                if (names[slot] !== undefined) names[slot] = undefined;
                if (tensors[slot] !== undefined) tensors[slot] = undefined;
                cFlags[slot] = 0;
                cSerial[slot] = -1;
                freeSlots[nFree++] = slot;
              }
            }
            if (logged) {
              // logged with the last allocation's serial, its slot kept, a temporary where no
              // category was decided (PeakWitness.makeRoom says why)
              if (cCat[slot] === CAT_UNRESOLVED) cCat[slot] = CAT_TEMPORARY;
              logSlot[logN] = slot;
              logAt[logN++] = serial;
            }
          } else {
            // a block the model never saw allocated (lost records, or before an attach)
            cur.partial = true;
            this._unknownFrees++;
            this._unknownFreeBytes += size;
          }
          if (a === ACTION.free) {
            // the fold's free_completed: the block leaves its chain, merged with free neighbours
            let freed = -1;
            if (rounded > SMALL_SIZE && layout !== null) {
              // LargePoolLayout.freeCompleted in place where the block's chain slot still holds
              // it and neither an unknown stretch nor an unsettled size is there: it turns free
              // and takes in a free neighbour on either side (absorb)
              if (chain >= 0 && chain < lKind.length && lKind[chain] === CHAIN_LIVE && lAddr[chain] === addr && (lNext[chain]! < 0 || lKind[lNext[chain]!] !== CHAIN_UNKNOWN) && lUnsettled[chain] === 0) {
                const n = lNext[chain]!;
                const p = lPrev[chain]!;
                freed = lSize[chain]!;
                lKind[chain] = CHAIN_FREE;
                if (n >= 0 && lKind[n] === CHAIN_FREE) {
                  lSize[chain]! += lSize[n]!;
                  const nn = lNext[n]!;
                  lNext[chain] = nn;
                  if (nn >= 0) lPrev[nn] = chain;
                  lKind[n] = 0;
                  lSpare[lNSpare++] = n;
                }
                if (p >= 0 && lKind[p] === CHAIN_FREE) {
                  lSize[p]! += lSize[chain]!;
                  const nn = lNext[chain]!;
                  lNext[p] = nn;
                  if (nn >= 0) lPrev[nn] = p;
                  lKind[chain] = 0;
                  lSpare[lNSpare++] = chain;
                }
              } else {
                lc.nSpare = lNSpare;
                lc.used = lUsed;
                freed = lc.freeCompleted(addr, chain) ?? -1;
                lNSpare = lc.nSpare;
                lUsed = lc.used;
                // as for a free_completed above: a block with no layout to go by changed nothing
                if (freed >= 0) todo |= Todo.CALLED;
              }
            }
            // active drops by the block's size, or for a block the model never saw, by what its
            // chain says, else the request rounded
            active += RC.ac * (slot >= 0 || freed < 0 ? size : freed);
            lastTime = extra[i]!;
            folded++;
          } else lastTime = t;
        }
        const last = one || lineCol[i] !== 0;
        if (a !== ACTION.free_completed) {
          // The timeline's open finest bucket: a record that falls in it moves only these locals;
          // the first after it closes the bucket (BUCKET, the record whole).
          if (t < fineEnd) {
            if (allocated < aMin) aMin = allocated;
            if (allocated > aMax) aMax = allocated;
            if (reservedMoves) {
              if (reserved < rMin) rMin = reserved;
              if (reserved > rMax) rMax = reserved;
            }
            lastA = allocated;
            lastR = reserved;
          } else todo |= Todo.BUCKET;
        }
        if (last) {
          stop = true;
          if (todo === 0) {
            i++;
            break;
          }
        }
        if (todo !== 0) {
          why = Left.WHOLE;
          i++;
          break;
        }
      }
      // ---- the state handed back ----
      blocks.nFree = nFree;
      blocks.used = used;
      blocks.changes += changes;
      lifetimes.pendLen = pendLen;
      log.n = logN;
      lc.nSpare = lNSpare;
      lc.used = lUsed;
      tt.requested = requested;
      tt.allocated = allocated;
      tt.active = active;
      tt.reserved = reserved;
      tt.peakAllocated = peakAllocated;
      tt.peakActive = peakActive;
      this.serial = serial;
      this._lastTime_us = lastTime;
      acc.peakOpen = peakOpen;
      // ---- what left the loop ----
      if (why === Left.RUN_END) break;
      if (why === Left.COPY_PEAK) {
        acc.copyPeak(runLive);
        runLive = 0;
        continue;
      }
      if (why === Left.LOG_FULL) {
        peaks.makeRoom(cur);
        continue;
      }
      if (why === Left.REPLACED) {
        // Its free was lost (ring lapped): it was freed, or the allocator could not hand the
        // address out again. Not a record: the rule does not count it as a free. Out of the sums
        // before the new block is in them (a peak's sums may be copied as it leaves); the new
        // block's slot taken first, as for any alloc, and put in its place.
        preSlot = blocks.take();
        blocks.changes--; // the loop counts the take
        const old = map.put(address[i]!, preSlot);
        const oldSize = blocks.size[old]!;
        tt.allocated -= oldSize;
        tt.active -= oldSize;
        if (acc.peakOpen) {
          acc.copyPeak(runLive);
          runLive = 0;
        }
        acc.drop(old, step);
        blocks.discard(old);
        this._replacedBlocks++;
        continue;
      }
      // WHOLE: record i − 1 is whole; its bucket, then what it asked for
      if (aMin <= aMax) timeline.extend(aMin, aMax, lastA, reservedMoves ? rMin : lastR, reservedMoves ? rMax : lastR, lastR);
      aMin = rMin = Infinity;
      aMax = rMax = -Infinity;
      if ((todo & Todo.BUCKET) !== 0) timeline.observe(time[i - 1]!, tt.allocated, tt.reserved);
      if ((todo & Todo.MAP_FULL) !== 0) map.rebuild();
      if ((todo & Todo.CHAIN_INDEX) !== 0) lc.indexGrown();
      if (stop) break;
    }
    if (aMin <= aMax) timeline.extend(aMin, aMax, lastA, reservedMoves ? rMin : lastR, reservedMoves ? rMax : lastR, lastR);
    acc.closeRun(runAlloc, runNAlloc, runLargest, runPeak, runFreed, runNFree, runFreedWithin, runRangeFreedWithin, runLive);
    this.foldedFrees = folded;
    return i;
  }

  /** The private pools (CUDA graphs, torch.cuda.MemPool) with their bytes; null where they cannot
   *  be told apart (a ring whose records carry no pool). */
  get privatePools(): readonly PrivatePool[] | null {
    if (!this.poolsInRecords) return this.snapshotPools;
    const v = this.version;
    if (this.poolsCache?.version !== v) this.poolsCache = { version: v, pools: privatePoolsOfSegments(this.segments, this.blocks) };
    return this.poolsCache.pools;
  }

  set privatePools(pools: readonly PrivatePool[] | null) {
    this.snapshotPools = pools;
  }

  /** segment_alloc (counted) or segment_map (expandable segments: pages mapped); `pool`: the pool
   *  the record carried (pools.ts poolKey; 0 the default pool or none carried). */
  segmentAlloc(t: number, address: number, size: number, stream: number, counted: boolean, pool = 0): void {
    this.t.apply(counted ? ACTION.segment_alloc : ACTION.segment_map, size, size);
    this.segments.add(address, size, stream, t, counted, pool);
    // the small pool's segments are 2 MiB each and cut to every request: only large ones need a chain
    if (!counted) this.expandable = true;
    else if (size !== SMALL_BUFFER) this.layout.segmentAlloc(address, size);
    this.observeSegment(t);
  }

  /** segment_free (counted), or segment_unmap (pages unmapped). */
  segmentFree(t: number, address: number, size: number, counted: boolean): void {
    this.t.apply(counted ? ACTION.segment_free : ACTION.segment_unmap, size, size);
    this.segments.remove(address, size, counted);
    if (counted && size !== SMALL_BUFFER) this.layout.segmentFree(address, size);
    this.observeSegment(t);
  }

  private observeSegment(t: number): void {
    this.timeline.observe(t, this.t.allocated, this.t.reserved);
    this._lastTime_us = t;
  }

  /** An OOM record. `largestFree(this)` sweeps the segments: asked only for incidents that are
   *  kept. (A function of the device, not a closure the caller makes: an arrow in the ingest loop
   *  that captured the loop's device binding cost one scope object per record, OOM or not.) */
  oom(t: number, request: number, deviceFree: number, largestFree: (d: DeviceState) => number, stack = 0, liveLines: ((d: DeviceState) => LineSums | null) | null = null): void {
    this._lastTime_us = t;
    this.t.apply(ACTION.oom, request, 0);
    this.oomLog.add(() => ({
      time_us: t,
      step: this._step,
      phase: this._phase,
      range: this._range,
      request_bytes: request,
      device_free_bytes: deviceFree,
      allocated_bytes: this.t.allocated,
      reserved_bytes: this.t.reserved,
      active_bytes: this.t.active,
      largest_free_block_bytes: largestFree(this),
      live_by_category_bytes: this.blocks.bytesByCat.slice(),
      nvml_used_bytes: this._nvmlUsed,
      stack,
      live_lines: liveLines ? liveLines(this) : null,
    }));
  }

  /** A record with nothing to account (a snapshot mark, a code this model does not know). */
  touch(t: number): void {
    this._lastTime_us = t;
  }

  // ---- torch's own figures ----

  private detail(): DetailAtSync {
    return {
      step: this._step,
      events: this.nAlloc + this.nFree,
      blockBytes: this.liveBytes(),
      largeBlocks: this.blocks.unsizedCount,
      requested: this.t.requested,
      unknownFreeBytes: this._unknownFreeBytes,
    };
  }

  /** A sync record: torch's figures here, compared with the blocks (see consistency.ts). */
  syncPoint(t: number, allocated: number, reserved: number, requested: number, events: number): SyncPoint | null {
    this._lastTime_us = t;
    const p = this.consistency.observe(this.detail(), t, allocated, reserved, requested, events);
    if (p !== null) {
      const cur = this.accounting.cur;
      cur.torchAllocated = allocated;
      cur.torchRequested = requested;
      // what the model held at the same point of the stream: the step table's figure beside torch's
      cur.heldAtSync = this.t.allocated;
      cur.eventsAtSync = this.nAlloc + this.nFree;
    }
    return p;
  }

  /** Set by a seed: torch's peaks may predate the records, and the next SYNC_PEAKS tied to its
   *  point says by how much (peaksFromTorch). */
  private peaksUnknown = false;

  /**
   * torch's max_memory_allocated() and max_memory_reserved() read with the seed, or at a sync
   * point the records have exactly reached (its SYNC tied to its count of events). Taken once after an attach's seed, the
   * first chance the records have to learn what the blocks cannot know: torch's peak there is the
   * higher of the blocks' highest since the attach and its peak before it, so where it is higher it
   * is the peak before the attach, from then on the floor of the peaks shown. Never taken on a
   * device whose records start with its allocator (a run's): there the blocks alone are torch's,
   * and every later sync point stays a comparison, not a source.
   */
  peaksFromTorch(peakAllocated: number, peakReserved: number): void {
    if (!this.peaksUnknown) return;
    this.peaksUnknown = false;
    if (peakAllocated > this.before.allocated) this.before.allocated = peakAllocated;
    if (peakReserved > this.before.reserved) this.before.reserved = peakReserved;
  }

  /** A closed ring's final header, read after its last record (see Consistency.observeEnd). */
  endPoint(allocated: number, reserved: number, requested: number): SyncPoint {
    return this.consistency.observeEnd(this.detail(), this._lastTime_us, allocated, reserved, requested);
  }

  /** NVML's used bytes for this process on this device, sampled at `t`. */
  nvml(pid: number, usedBytes: number, t: number): void {
    this._nvmlUsed = usedBytes;
    this._nvmlTime_us = t;
    this._nvmlPid = pid;
    this.timeline.observeNvml(t, usedBytes, this.t.allocated, this.t.reserved);
  }

  // ---- boundaries ----

  private stepChange(t: number, step: number, phase: number, range: number): void {
    this.endPhaseInstance(t, phase);
    this.accounting.cur.eventsAtEnd = this.nAlloc + this.nFree;
    this.accounting.endStep(t, this.t.allocated, this.t.reserved);
    this.peaks.stepEnded(this.accounting.cur, this.serial, this.categoryCode);
    this.lifetimes.stepBoundary();
    this._step = step;
    this._phase = phase;
    this._range = range;
    this.accounting.beginStep(t, step, phase, range, this.serial, this.t.allocated, this.t.reserved);
    if (phase === PHASE.forward) this.lifetimes.forward(this.serial, step);
  }

  private phaseChange(t: number, phase: number): void {
    this.endPhaseInstance(t, phase);
    this._phase = phase;
    this.accounting.beginPhase(t, phase, this.serial, this.t.allocated);
    if (phase === PHASE.forward) this.lifetimes.forward(this.serial, this._step);
  }

  private rangeChange(range: number): void {
    this._range = range;
    this.accounting.beginRange(range, this.serial, this.t.allocated);
  }

  /** The running phase instance ends (`next` begins): its survivors get their category, the step
   *  its figures for the phase. */
  private endPhaseInstance(t: number, next: number): void {
    this.phaseHistory.add(this._phase, this.accounting.phaseStart_us, t);
    this.accounting.endPhase(t, this._phase, this.t.allocated, this.lifetimes.endPhase(this._phase, next));
  }

  // ---- names, resyncs, lost records ----

  /** The agent's names for this device's tensors (see names.ts). */
  applyNames(tensors: NamedTensor[]): Named {
    return nameBlocks(this.blocks, this.lifetimes, tensors, this._lost > 0 || this._unknownFrees > 0, this._lastTime_us);
  }

  /** Records were lost before the next ones of this device: detail is partial from here. */
  noteLost(n: number): void {
    this._lost += n;
    this.accounting.cur.partial = true;
    // the lost records may have cut, merged or given back any segment's blocks: no chain is known
    // until a snapshot or a seed says it again (new segments get theirs from their segment_alloc)
    this.layout = new LargePoolLayout(this.rules);
    this.consistency.noteLost();
  }

  /**
   * Replace block detail with a snapshot's segments (torch.cuda.memory._snapshot()["segments"] of
   * this device; see resync.ts). Afterwards the detail is whole again (the loss counters restart).
   */
  resync(segments: ReadonlyArray<SnapshotSegment>, t: number): { kept: number; added: number; dropped: number } {
    this.privatePools = privatePoolsOf(segments);
    const r = resyncFromSegments(this.blocks, this.segments, segments, t, (slot) => this.accounting.drop(slot, this._step));
    this.chainsFrom(segments);
    this.anchor(this.blocks.liveBytes(), r.reserved, r.active);
    this._lost = 0;
    this._unknownFrees = 0;
    this._unknownFreeBytes = 0;
    this._replacedBlocks = 0;
    this.consistency.restart();
    return { kept: r.kept, added: r.added, dropped: r.dropped };
  }

  /**
   * An attach's seed (seed.ts), applied right after this device's `events`-th counted record: the
   * allocator's state there. Blocks from before the attach join the detail, so it is whole: nothing
   * is left "from before the attach", and frees of such blocks seen until here are explained.
   */
  seed(segments: readonly SeedSegment[], t: number): Seeded {
    const r = seedBlocks(this.blocks, this.segments, segments, t, (slot) => this.accounting.drop(slot, this._step));
    this.chainsFrom(segments);
    this.anchor(this.blocks.liveBytes(), r.reserved, r.active);
    const tt = this.t;
    if (r.requested !== null) tt.requested = r.requested;
    if (tt.allocated > tt.peakAllocated) tt.peakAllocated = tt.allocated;
    if (tt.reserved > tt.peakReserved) tt.peakReserved = tt.reserved;
    if (tt.active > tt.peakActive) tt.peakActive = tt.active;
    // torch's peaks before the attach are in no block: the next sync point's figures give them
    this.peaksUnknown = true;
    this._unknownFrees = 0;
    this._unknownFreeBytes = 0;
    this._replacedBlocks = 0;
    this.consistency.seeded(r.requested !== null);
    this.timeline.observe(t, this.t.allocated, this.t.reserved);
    return r;
  }

  /** Every segment's chain of blocks from a snapshot's or a seed's segments (each block with
   *  torch's size, free memory between them): from here every block has torch's size. */
  private chainsFrom(segments: ReadonlyArray<{ address: number; total_size: number; is_expandable?: boolean; blocks?: ReadonlyArray<{ address: number; size: number; state: string }> }>): void {
    this.layout = new LargePoolLayout(this.rules);
    this.blocks.clearUnsized();
    for (const g of segments) {
      if (g.is_expandable === true) this.expandable = true;
      if (g.is_expandable === true || g.total_size === SMALL_BUFFER) continue;
      const live: SeedBlock[] = [];
      for (const b of g.blocks ?? []) if (b.state === "active_allocated" || b.state === "active_pending_free") live.push({ address: b.address, size: b.size, known: true });
      live.sort((x, y) => x.address - y.address);
      this.layout.seed(g.address, g.total_size, live);
    }
  }
}
