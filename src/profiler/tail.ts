// The last N records a model ingested, kept as columns: what a snapshot's `device_traces` needs
// when the process itself records no memory history. Bounded like PyTorch's own history
// (max_entries), copied a batch at a time with TypedArray.set: no work per event.

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
  /** Records ever pushed; record k (k < total) sits at k % capacity while k >= total - capacity. */
  total = 0;
  /** The first record after the last loss: a trace that crossed a gap would not add up. */
  validFrom = 0;

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
  }

  /** Records were lost before the next push: the trace restarts after them. */
  noteLost(): void {
    this.validFrom = this.total;
  }

  /** Copy records [start, end) of a batch. */
  push(batch: EventBatch, start = 0, end = batch.count): void {
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
