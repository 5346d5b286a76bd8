// The newest frees of large blocks (above 1 MiB: the hook takes the stack of every one), in a ring
// of fixed room: address, size and stack. Which line last held a range that is free now
// (hole-lines.ts) where the model keeps no records (run --json, replay --json, serve): their
// reserved-unallocated finding named no line. Three stores a large free and nothing held back: the
// log of frees (at-peak.ts) holds the block table's slots for the peaks' pictures, and logging
// every large free there cost the ingest 6-10% on hf-gpt2.ring.

/** Frees kept (a power of two): 160 KiB a device. */
export const FREED_LARGE_KEPT = 8192;
const MASK = FREED_LARGE_KEPT - 1;

export class FreedLarge {
  readonly address = new Float64Array(FREED_LARGE_KEPT);
  readonly size = new Float64Array(FREED_LARGE_KEPT);
  /** The model's stack id of the block (0: none). */
  readonly stack = new Uint32Array(FREED_LARGE_KEPT);
  /** Frees pushed, ever: the newest is at (total - 1) & MASK. */
  total = 0;

  push(address: number, size: number, stack: number): void {
    const k = this.total++ & MASK;
    this.address[k] = address;
    this.size[k] = size;
    this.stack[k] = stack;
  }

  /** The kept frees, newest first, until `fn` returns false. */
  newestFirst(fn: (address: number, size: number, stack: number) => boolean | void): void {
    const first = Math.max(0, this.total - FREED_LARGE_KEPT);
    for (let r = this.total - 1; r >= first; r--) {
      const k = r & MASK;
      if (fn(this.address[k]!, this.size[k]!, this.stack[k]!) === false) return;
    }
  }
}
