// A device's totals as readers see them: the bytes and counts its records moved (totals.ts, the
// ring header's rule), behind getters so that only the device's own event methods move them, and the
// ring header's exact figures put in their place (anchor) after lost records, a resync or a seed.
// DeviceState (device.ts) extends it: the per-event methods there reach `t` directly.

import { Totals } from "./totals";

export abstract class TotalsReadout {
  /** Totals from the events, moved as the ring header's rule says (totals.ts); the ring
   *  header's exact ones, where there is a header, re-anchor them after lost records. */
  protected readonly t = new Totals();
  /** torch's peaks from before the records (an attach's: max_memory_allocated() and
   *  max_memory_reserved() may have been reached before the agent came), as a sync point read
   *  them (DeviceState.peaksFromTorch); 0 where none was read. The peaks shown are the higher of
   *  these and the blocks' own. */
  protected readonly before = { allocated: 0, reserved: 0 };

  get allocated(): number {
    return this.t.allocated;
  }
  /** Live bytes as the program asked for them (the trace's sizes): torch's requested_bytes. */
  get requested(): number {
    return this.t.requested;
  }
  get reserved(): number {
    return this.t.reserved;
  }
  get active(): number {
    return this.t.active;
  }
  /** torch's max_memory_allocated(): the blocks' highest, or torch's from before the records. */
  get peakAllocated(): number {
    return Math.max(this.t.peakAllocated, this.before.allocated);
  }
  get peakReserved(): number {
    return Math.max(this.t.peakReserved, this.before.reserved);
  }
  /** The most the records' blocks held at once (from an attach's seed on: since the attach). */
  get blocksPeakAllocated(): number {
    return this.t.peakAllocated;
  }
  get peakActive(): number {
    return this.t.peakActive;
  }
  /** The agent reset torch's peaks (`r`): the peaks shown start again from what is held now, as
   *  max_memory_allocated() does, and torch's peaks from before the records are gone with it. */
  resetPeaks(): void {
    this.t.resetPeaks();
    this.before.allocated = 0;
    this.before.reserved = 0;
  }
  get nAlloc(): number {
    return this.t.count("n_alloc");
  }
  get nFree(): number {
    return this.t.count("n_free");
  }
  get nSegmentAlloc(): number {
    return this.t.count("n_segment_alloc");
  }
  get nSegmentFree(): number {
    return this.t.count("n_segment_free");
  }
  get nOom(): number {
    return this.t.count("n_oom");
  }

  /** Exact totals from the ring header replace the event-derived ones (after lost records). */
  anchor(allocated: number, reserved: number, active: number): void {
    this.t.allocated = allocated;
    this.t.reserved = reserved;
    this.t.active = active;
  }
}
