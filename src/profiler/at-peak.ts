// What was alive at a step's peak: the blocks, not only their sums by category (those the step
// record keeps). A step's peak is an allocation (its serial), or the step's start where nothing
// rose above it. A block was alive at that moment when it was allocated at or before it and freed
// after it (or not yet). The blocks alive now are in the block table; the ones freed since are in
// a log of frees that reaches back to the oldest kept step's peak. So nothing is copied per step:
// each free adds one row, and a picture is put together only when a view asks for it. The run's
// highest peak is copied out once, when its step is about to leave the log's reach.

import type { BlockTable } from "./blocks";
import type { StepRecord } from "./steps";

/** Finished steps whose pictures can be put together (besides the run's highest). The log holds
 *  the frees of this many steps: some 50 bytes a free. */
export const PEAK_STEPS_KEPT = 8;

/** Bytes of one block's row: five columns of 8 bytes, three of 4, two of 1 (a picture's, and the
 *  block table's that the log of frees holds back). */
const BYTES_PER_ROW = 5 * 8 + 3 * 4 + 2;

/** Bytes of one row of the log of frees: its slot (4) and when it was freed (8). */
const FREE_LOG_ROW_BYTES = 4 + 8;

/** Blocks as columns: a moment's picture, rows [0, n). */
export class PeakBlocks {
  n = 0;
  size: Float64Array;
  address: Float64Array;
  time_us: Float64Array;
  /** The allocation's serial: tells the same block, still alive later, from a reuse of its address. */
  serial: Float64Array;
  /** In the log: the last allocation's serial when the block was freed. */
  freedAt: Float64Array;
  step: Uint32Array;
  range: Uint32Array;
  /** The stack that allocated it (model.stacks' id; 0: unknown). */
  stack: Uint32Array;
  phase: Uint8Array;
  /** Category code; a block freed within the phase that made it is a temporary. */
  category: Uint8Array;
  /** Names by row (undefined for most: most blocks have none). An array as long as the columns,
   *  filled with undefined, not a map: a gradient freed every step keeps its carried name, and a
   *  map took a set for each and a rebuild at each compaction; nor a sparse array (BlockTable.names). */
  readonly names: (string | undefined)[];

  /** Room for `rows` rows (it grows as rows come): a picture is made with room for the blocks it
   *  may hold, not grown to them from a few hundred each time a view asks for one. */
  constructor(rows = 256) {
    const n = Math.max(16, rows);
    this.size = new Float64Array(n);
    this.address = new Float64Array(n);
    this.time_us = new Float64Array(n);
    this.serial = new Float64Array(n);
    this.freedAt = new Float64Array(n);
    this.step = new Uint32Array(n);
    this.range = new Uint32Array(n);
    this.stack = new Uint32Array(n);
    this.phase = new Uint8Array(n);
    this.category = new Uint8Array(n);
    this.names = new Array<string | undefined>(n).fill(undefined);
  }

  /** Copy slot `s` of `b` (its category `cat`, freed at `freedAt`). */
  push(b: BlockTable, s: number, cat: number, freedAt: number): void {
    if (this.n === this.size.length) this.grow(this.n * 2);
    const i = this.n++;
    this.size[i] = b.size[s]!;
    this.address[i] = b.address[s]!;
    this.time_us[i] = b.time_us[s]!;
    this.serial[i] = b.serial[s]!;
    this.freedAt[i] = freedAt;
    this.step[i] = b.step[s]!;
    this.range[i] = b.range[s]!;
    this.stack[i] = b.stack[s]!;
    this.phase[i] = b.phase[s]!;
    this.category[i] = cat;
    this.names[i] = b.names[s];
  }

  bytes(): number {
    let sum = 0;
    for (let i = 0; i < this.n; i++) sum += this.size[i]!;
    return sum;
  }

  private grow(n: number): void {
    const f = (a: Float64Array) => ((x) => (x.set(a), x))(new Float64Array(n));
    const u = (a: Uint32Array) => ((x) => (x.set(a), x))(new Uint32Array(n));
    const b = (a: Uint8Array) => ((x) => (x.set(a), x))(new Uint8Array(n));
    this.size = f(this.size);
    this.address = f(this.address);
    this.time_us = f(this.time_us);
    this.serial = f(this.serial);
    this.freedAt = f(this.freedAt);
    this.step = u(this.step);
    this.range = u(this.range);
    this.stack = u(this.stack);
    this.phase = b(this.phase);
    this.category = b(this.category);
    for (let i = this.names.length; i < n; i++) this.names.push(undefined);
  }
}

/**
 * The frees since the oldest kept step's peak, in order: each row the freed block's slot and the
 * last allocation's serial when it was freed. The block's columns stay in the block table, its
 * slot held back from reuse (BlockTable.release waits for the row to be dropped): a logged free
 * writes two numbers where copying the block's ten columns read them from all over the table,
 * which following real ranks took a fifth of the monitor's samples (its blocks are many, and a
 * free's columns far from each other in memory).
 */
export class FreeLog {
  /** Rows [head, n) are held; row number = base + index, for good. */
  head = 0;
  base = 0;
  n = 0;
  slot = new Int32Array(256);
  freedAt = new Float64Array(256);

  push(slot: number, freedAt: number): void {
    if (this.n === this.slot.length) this.grow();
    this.slot[this.n] = slot;
    this.freedAt[this.n++] = freedAt;
  }

  /** Twice the room. */
  grow(): void {
    const s = new Int32Array(this.slot.length * 2);
    s.set(this.slot);
    const f = new Float64Array(this.slot.length * 2);
    f.set(this.freedAt);
    this.slot = s;
    this.freedAt = f;
  }

  /** Drop the first `k` held rows (their slots already given back): moved down only once half the
   *  room is dropped, so each row moves at most once on average. */
  dropFirst(k: number): void {
    this.head += k;
    if (this.head * 2 < this.slot.length) return;
    k = this.head;
    this.head = 0;
    this.base += k;
    this.slot.copyWithin(0, k, this.n);
    this.freedAt.copyWithin(0, k, this.n);
    this.n -= k;
  }
}

/** One moment's blocks and what they should add up to. */
export interface PeakPicture {
  step: number;
  /** allocated at the moment (the step record's peak). */
  peak_bytes: number;
  time_us: number;
  /** reserved at the moment (the step record's at its peak, or at its end). */
  reserved_bytes: number;
  blocks: PeakBlocks;
  /** Detail was partial in the step (lost records, frees of blocks never seen allocated). */
  partial: boolean;
}

/** A finished step: its record and its peak's moment: after allocation `at`, and where the peak is
 *  the step's start (no allocation rose above it), after the frees logged before row `row` too
 *  (frees between two allocations are told apart by their order in the log). */
interface Moment {
  rec: StepRecord;
  at: number;
  row: number;
}
/** A finished step: its peak, and its end (after its last allocation and every free logged). */
interface Kept extends Moment {
  end: Moment;
}

export class PeakWitness {
  /** Frees since the oldest kept step's peak, in order (so `freedAt` never decreases). The
   *  model's run of allocator records appends its logged frees in place (after makeRoom where the
   *  log is full: DeviceState.allocatorRecords). */
  readonly log = new FreeLog();
  /** The last allocation's serial when the running step began (its peak until one rises above),
   *  and the log's row count then. */
  private startSerial = 0;
  private startRow = 0;
  /** The last finished steps, oldest first. */
  private readonly kept: Kept[] = [];
  /** How many finished steps are kept (a replay keeps as many as the model keeps step records). */
  keep = PEAK_STEPS_KEPT;
  /** The run's highest finished step: its picture once copied out of the log's reach. */
  private best: Kept | null = null;
  private bestPicture: PeakPicture | null = null;

  constructor(private readonly blocks: BlockTable) {}

  /** What the log of frees holds now: its rows, and their bytes (the log's room, and the block
   *  table's rows its slots hold back; names apart). */
  held(): { rows: number; bytes: number } {
    const log = this.log;
    return { rows: log.n - log.head, bytes: log.slot.length * FREE_LOG_ROW_BYTES + (log.n - log.head) * BYTES_PER_ROW };
  }

  /** The steps whose picture can be had, oldest first (the run's highest included). */
  steps(): number[] {
    const s = this.kept.map((k) => k.rec.step);
    if (this.best && !s.includes(this.best.rec.step)) s.unshift(this.best.rec.step);
    return s;
  }

  /** The running step's (`cur`'s) peak moment, as the serial of the allocation it came after: a
   *  live block of a serial at or below it was born by the peak. One born after it is freed before
   *  any later peak, alive at no peak kept, and its free is not logged. (The run's loop reads it
   *  when it enters, and moves it itself where an alloc rises above the peak:
   *  DeviceState.allocatorRecords.) */
  peakAt(cur: StepRecord): number {
    return this.peakSerial(cur);
  }

  /** Room for one more free in the log while `cur` runs. A block born by the running step's peak
   *  (peakAt) and freed while it runs is logged with the last allocation's serial then, its slot
   *  kept, with the category it had (a temporary where none was decided), until no kept peak needs
   *  it: DeviceState.allocatorRecords appends it in place. Where the log is full, before it grows,
   *  what no kept or running peak needs is dropped (a run without step marks would otherwise log
   *  every free it ever made). */
  makeRoom(cur: StepRecord): void {
    const log = this.log;
    if (log.n !== log.slot.length) return;
    this.trim(this.kept.length ? this.kept[0]!.at : this.peakSerial(cur));
    if (log.n === log.slot.length) log.grow();
  }

  /** Drop the frees made before allocation `from` (alive at no peak from there on): their slots go
   *  back to the block table. */
  private trim(from: number): void {
    const log = this.log;
    const b = this.blocks;
    let i = log.head;
    while (i < log.n && log.freedAt[i]! < from) b.release(log.slot[i++]!);
    log.dropFirst(i - log.head);
  }

  private peakSerial(rec: StepRecord): number {
    return rec.peakSerial >= 0 ? rec.peakSerial : this.startSerial;
  }

  /** The running step's peak moment. */
  private moment(rec: StepRecord): Moment {
    return rec.peakSerial >= 0 ? { rec, at: rec.peakSerial, row: 0 } : { rec, at: this.startSerial, row: this.startRow };
  }

  /** The running step `cur` ended (its phases resolved); the next begins after allocation `serial`. */
  stepEnded(cur: StepRecord, serial: number, categoryOf: (slot: number) => number): void {
    this.startSerial = serial;
    this.startRow = this.log.base + this.log.n;
    const k = { ...this.moment(cur), end: { rec: cur, at: serial, row: this.startRow } };
    if (this.best === null || cur.peak_allocated > this.best.rec.peak_allocated) {
      this.best = k;
      this.bestPicture = null;
    }
    this.kept.push(k);
    if (this.kept.length <= this.keep) return;
    const gone = this.kept.shift()!;
    if (gone === this.best) this.bestPicture = this.put(gone, categoryOf);
    this.trim(this.kept[0]!.at);
  }

  /** The blocks alive at a moment: live ones allocated by then, and those freed since. */
  private put({ rec, at, row }: Moment, categoryOf: (slot: number) => number, end = false): PeakPicture {
    const log = this.log;
    const out = new PeakBlocks(this.blocks.count + log.n - Math.max(log.head, row - log.base));
    const b = this.blocks;
    for (const s of b.bySlot.values()) if (b.serial[s]! <= at) out.push(b, s, categoryOf(s), NaN);
    for (let i = Math.max(log.head, row - log.base); i < log.n; i++) {
      const s = log.slot[i]!;
      if (b.serial[s]! <= at && log.freedAt[i]! >= at) out.push(b, s, b.category[s]!, log.freedAt[i]!);
    }
    return end
      ? { step: rec.step, peak_bytes: rec.allocated_at_end, time_us: rec.end_us, reserved_bytes: rec.reserved_at_end, blocks: out, partial: rec.partial }
      : { step: rec.step, peak_bytes: rec.peak_allocated, time_us: rec.peak_time_us, reserved_bytes: rec.reserved_at_peak, blocks: out, partial: rec.partial };
  }

  /** The running step's picture (`cur`), a kept step's (by number) or the run's highest ("run"), at
   *  the peak; a kept step's at its end (`end`). */
  picture(cur: StepRecord, which: "step" | "run" | number, categoryOf: (slot: number) => number, end = false): PeakPicture | null {
    if (end) {
      const k = this.kept.find((x) => x.rec.step === which);
      return k ? this.put(k.end, categoryOf, true) : null;
    }
    if (which === "step") return this.put(this.moment(cur), categoryOf);
    if (which === "run") {
      if (this.best === null || cur.peak_allocated > this.best.rec.peak_allocated) return this.put(this.moment(cur), categoryOf);
      return this.bestPicture ?? this.put(this.best, categoryOf);
    }
    const k = this.kept.find((x) => x.rec.step === which);
    if (k) return this.put(k, categoryOf);
    if (this.best?.rec.step === which) return this.bestPicture ?? this.put(this.best, categoryOf);
    return null;
  }
}
