// The last N records a model ingested, kept as columns: what a snapshot's `device_traces` needs
// when the process itself records no memory history, and what the screens' phase bands and
// timeline draw. Bounded like PyTorch's own history (max_entries). A source reads straight into it
// where it can (window: a live ring's reader writes the columns in place, and the model's ingest
// reads them from there); other batches are copied in with TypedArray.set. No work per event.

import type { EventBatch } from "../ffi/events";

/** PyTorch's default `_record_memory_history(max_entries=...)` is unbounded; the agent's is 100,000. */
export const DEFAULT_TRACE_ENTRIES = 100_000;

export class EventTail {
  readonly capacity: number;
  readonly time_us: Float64Array;
  readonly action: Uint8Array;
  readonly device: Int8Array;
  readonly address: Float64Array;
  readonly size: Float64Array;
  readonly stream: Float64Array;
  readonly extra: Float64Array;
  readonly range: Uint32Array;
  readonly phase: Uint8Array;
  readonly step: Uint32Array;
  readonly line: Uint32Array;
  readonly stack: Uint32Array;
  /** Each allocator record's block as the model sized it (torch's: a large block the allocator did
   *  not split holds up to 1 MiB more than its request rounded), written by the model's ingest
   *  (blockSizesFor): a view of the records (the Timeline's bands) adds up to the model's totals
   *  only with the model's sizes. 0 for other records. */
  readonly block: Float64Array;
  /** Where the model writes the block sizes of a batch that is copied in (push copies them). */
  private scratch: Float64Array = new Float64Array(0);
  /** The block column's view beside the window's (its sizes are written in place). */
  private windowBlock: Float64Array = new Float64Array(0);
  /** Records ever pushed; record k (k < total) sits at k % capacity while k >= total - capacity. */
  total = 0;
  /** The first record after the last loss: a trace that crossed a gap would not add up. */
  validFrom = 0;
  /** The batch a source reads into in place (openWindow): views of the columns from the next slot. */
  readonly window: EventBatch;
  /** The record number of the window's first row. */
  private windowAt = -1;
  /** A batch was copied in (push): its stack ids may sit in slots a window reuses. */
  private copied = false;

  constructor(capacity = DEFAULT_TRACE_ENTRIES) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`trace capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.time_us = new Float64Array(capacity);
    this.action = new Uint8Array(capacity);
    this.device = new Int8Array(capacity);
    this.address = new Float64Array(capacity);
    this.size = new Float64Array(capacity);
    this.stream = new Float64Array(capacity);
    this.extra = new Float64Array(capacity);
    this.range = new Uint32Array(capacity);
    this.phase = new Uint8Array(capacity);
    this.step = new Uint32Array(capacity);
    this.line = new Uint32Array(capacity);
    this.stack = new Uint32Array(capacity);
    this.block = new Float64Array(capacity);
    this.window = this.views(0, 0);
  }

  private views(at: number, n: number): EventBatch {
    const w = { count: 0 } as EventBatch;
    this.point(w, at, n);
    return w;
  }

  /** `w`'s columns made views of slots [at, at + n). */
  private point(w: EventBatch, at: number, n: number): void {
    const end = at + n;
    w.time_us = this.time_us.subarray(at, end);
    w.action = this.action.subarray(at, end);
    w.device = this.device.subarray(at, end);
    w.phase = this.phase.subarray(at, end);
    w.address = this.address.subarray(at, end);
    w.size = this.size.subarray(at, end);
    w.stream = this.stream.subarray(at, end);
    w.extra = this.extra.subarray(at, end);
    w.step = this.step.subarray(at, end);
    w.range = this.range.subarray(at, end);
    w.line = this.line.subarray(at, end);
    w.stack = this.stack.subarray(at, end);
  }

  /**
   * `window` made the next `max` slots (fewer where the ring of slots wraps first), for a source to
   * read into; pushing its rows then only counts them (they are in place). The records are then
   * written once, by the read, where a copy wrote them again (a session's tick following four
   * busy rings: the same tree copying took 1.24 and 0.97 times as long in two runs,
   * bench/results/session-ab/in-place-*, inside this machine's noise). Its stack column is zero,
   * as a ring's records carry none.
   */
  openWindow(max: number): EventBatch {
    const at = this.total % this.capacity;
    const n = Math.min(max, this.capacity - at);
    this.point(this.window, at, n);
    this.windowBlock = this.block.subarray(at, at + n);
    this.window.count = 0;
    // Only a copied batch (a snapshot's trace) can have left a stack id in these slots.
    if (this.copied) this.window.stack.fill(0);
    this.windowAt = this.total;
    return this.window;
  }

  /** Where the model writes the block size of `batch`'s record i (at i): the kept column itself
   *  for the window read in place, else a scratch that push copies with the records. */
  blockSizesFor(batch: EventBatch): Float64Array {
    if (batch === this.window) return this.windowBlock;
    const n = batch.time_us.length;
    if (this.scratch.length < n) this.scratch = new Float64Array(n);
    return this.scratch;
  }

  /** Records were lost before the next push: the trace restarts after them. */
  noteLost(): void {
    this.validFrom = this.total;
  }

  /** Copy records [start, end) of a batch (the window's, read in place: counted). */
  push(batch: EventBatch, start = 0, end = batch.count): void {
    if (batch === this.window && this.windowAt + start === this.total) {
      this.total += end - start;
      return;
    }
    this.copied = true;
    const sizes = batch === this.window ? this.windowBlock : this.scratch;
    // More than the capacity at once: only the newest fit.
    if (end - start > this.capacity) {
      this.total += end - start - this.capacity;
      start = end - this.capacity;
    }
    while (start < end) {
      const at = this.total % this.capacity;
      const n = Math.min(end - start, this.capacity - at);
      this.time_us.set(batch.time_us.subarray(start, start + n), at);
      this.action.set(batch.action.subarray(start, start + n), at);
      this.device.set(batch.device.subarray(start, start + n), at);
      this.address.set(batch.address.subarray(start, start + n), at);
      this.size.set(batch.size.subarray(start, start + n), at);
      this.stream.set(batch.stream.subarray(start, start + n), at);
      this.extra.set(batch.extra.subarray(start, start + n), at);
      this.range.set(batch.range.subarray(start, start + n), at);
      this.phase.set(batch.phase.subarray(start, start + n), at);
      this.step.set(batch.step.subarray(start, start + n), at);
      this.line.set(batch.line.subarray(start, start + n), at);
      this.stack.set(batch.stack.subarray(start, start + n), at);
      this.block.set(sizes.subarray(start, start + n), at);
      this.total += n;
      start += n;
    }
  }

  /** The oldest record still held and valid (a record number, not a slot). */
  get first(): number {
    return Math.max(this.validFrom, this.total - this.capacity);
  }

  /** The slot of record number k (first <= k < total). */
  slot(k: number): number {
    return k % this.capacity;
  }
}
