// Feeding a model: the one way records go from a source into a ProfilerModel, for a live ring
// each tick, a recording replayed, a snapshot's trace and the demo alike. Pure: the source is read
// through its interface, and where to stop is the caller's (a stream position, a recorded moment,
// a number of records); nothing here waits or looks at a clock.

import { newEventBatch, type EventBatch, type RingHeader } from "../ffi/events";
import type { ProfilerModel } from "./model";
import type { EventTail } from "./tail";

/** What a model is fed from: the ring reader (src/ffi/ring.ts), a snapshot's trace
 *  (src/snapshot/trace-source.ts) or batches in memory (batchSource). */
export interface EventSource {
  header(): RingHeader;
  /** New records into `batch`, stopping at stream position `until` (records consumed so far,
   *  lost ones included). A source may fold two records into one (a ring reader opened with
   *  `fold`); next() then tells the position where counts no longer do. */
  read(batch: EventBatch, until?: number): { count: number; lost: number };
  next?(): number;
}

/** Where a feed stops; each absent bound is no bound (all absent: the source's end). */
export interface Until {
  /** A stream position: reads stop there, so that what is due at it (names taken at that moment)
   *  comes between the records before and after. */
  position?: number;
  /** A recorded moment: the first record at or after it is kept for the next feed. */
  time_us?: number;
  /** Records fed at most, counted per read (a read may run over by one batch): bounded work. */
  records?: number;
}

export interface Fed {
  records: number;
  lost: number;
  /** Why it stopped: the source had nothing more, or a bound of `until` was met. */
  stop: "end" | "position" | "time" | "records";
}

/** A source as feed reads it: its batch, the records read but not fed yet (a feed stopped at a
 *  moment inside a batch), and the stream position read up to. */
export class FeedSource {
  /** The batch the last fill read into. */
  batch: EventBatch;
  /** The first record of `batch` not fed yet (== batch.count: none waits). */
  private at = 0;
  private lost = 0;
  private read_ = 0;
  /** Records a fill reads at most (the batch's room). */
  private readonly capacity: number;

  /** `batch`: a batch of its own (a capacity), or one shared by feeds that never stop at a moment
   *  (nothing is left in it between them). `into`: the trace of the model this source feeds, where
   *  it keeps one: each fill reads into the trace's window, as many records as `batch` holds, so
   *  the records are written once, in place (EventTail.openWindow), not copied there after. */
  constructor(
    readonly source: EventSource,
    batch: EventBatch | number = 65_536,
    private readonly into: EventTail | null = null,
  ) {
    this.batch = typeof batch === "number" ? newEventBatch(batch) : batch;
    this.capacity = this.batch.action.length;
    this.batch.count = 0;
  }

  /** The stream position read up to: records read (fed or waiting) and lost. */
  get position(): number {
    return this.source.next ? this.source.next() : this.read_;
  }

  /** Whether records read wait to be fed. */
  get waiting(): boolean {
    return this.at < this.batch.count || this.lost > 0;
  }

  /** The recorded time of the first record waiting (NaN: none waits). */
  get nextTime(): number {
    return this.at < this.batch.count ? this.batch.time_us[this.at]! : Number.NaN;
  }

  /** Reads a batch where none waits; false when the source had nothing up to `until`. */
  fill(until: number): boolean {
    if (this.waiting) return true;
    if (this.into) this.batch = this.into.openWindow(this.capacity);
    const { count, lost } = this.source.read(this.batch, until);
    this.batch.count = count;
    this.at = 0;
    this.lost = lost;
    this.read_ += count + lost;
    return count > 0 || lost > 0;
  }

  /** Feeds the waiting records before `time_us` (all of them: Infinity), and the records lost
   *  before them: what was fed. */
  feedTo(model: ProfilerModel, time_us: number): { records: number; lost: number } {
    const start = this.at;
    const lost = this.lost;
    let end = start;
    const time = this.batch.time_us;
    // Records are in time order, give or take two writer threads.
    while (end < this.batch.count && time[end]! < time_us) end++;
    if (lost > 0 || end > start) model.ingest(this.batch, lost, start, end);
    this.lost = 0;
    this.at = end;
    return { records: end - start, lost };
  }
}

/** Feeds `model` from `source` until a bound of `until` is met or the source has nothing more. */
export function feed(model: ProfilerModel, source: FeedSource, until: Until = {}): Fed {
  const position = until.position ?? Infinity;
  const time = until.time_us ?? Infinity;
  const most = until.records ?? Infinity;
  let records = 0;
  let lost = 0;
  for (;;) {
    if (!source.waiting) {
      if (records >= most) return { records, lost, stop: "records" };
      if (source.position >= position) return { records, lost, stop: "position" };
      if (!source.fill(position)) return { records, lost, stop: "end" };
    }
    const fed = source.feedTo(model, time);
    records += fed.records;
    lost += fed.lost;
    if (source.waiting) return { records, lost, stop: "time" };
  }
}

/** A source over batches already in memory (a test's events): every column of each batch as it is. */
export function batchSource(header: RingHeader, batches: EventBatch[]): EventSource {
  let k = 0;
  let offset = 0;
  return {
    header: () => header,
    read(out: EventBatch) {
      while (k < batches.length && offset >= batches[k]!.count) {
        k++;
        offset = 0;
      }
      if (k >= batches.length) {
        out.count = 0;
        return { count: 0, lost: 0 };
      }
      const src = batches[k]!;
      const n = Math.min(out.action.length, src.count - offset);
      // Every column the batch has, so that one added to EventBatch (as `line` was) reaches the model.
      for (const name of Object.keys(src) as (keyof EventBatch)[]) {
        const column = src[name];
        if (typeof column !== "number") (out[name] as Float64Array).set((column as Float64Array).subarray(offset, offset + n));
      }
      offset += n;
      out.count = n;
      return { count: n, lost: 0 };
    },
  };
}
