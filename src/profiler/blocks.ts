// Live blocks of one device: address → slot in typed-array columns. The hot path allocates no
// object per event: a hash table from address to slot number, a free list of slots, and columns
// that grow by doubling only when more blocks are alive at once than ever before.

import { AddressMap } from "./address-map";

/** What the agent said of the tensor a block holds, beside its name. */
export interface TensorInfo {
  shape: number[] | null;
  dtype: string | null;
  /** Named from the same tensor in an earlier step (same address, size and category), not asked. */
  carried: boolean;
}

export class BlockTable {
  /** address → slot */
  readonly bySlot = new AddressMap();
  capacity: number;
  address: Float64Array;
  size: Float64Array;
  stream: Float64Array;
  time_us: Float64Array;
  /** Serial number of the allocation (unique over the run, increasing); tells a reused slot from
   *  its past, and whether a block was allocated in the running phase or range (serial above the
   *  serial at its start). 0 for blocks added by a resync. */
  serial: Float64Array;
  step: Uint32Array;
  range: Uint32Array;
  phase: Uint8Array;
  category: Uint8Array;
  /** 1 = category came from the agent's names, 2 = block inserted by a resync (no alloc seen). */
  flags: Uint8Array;
  /** Tensor names from the agent, by slot (undefined where unknown). */
  names: (string | undefined)[] = [];
  /** The named tensor's shape and dtype, and whether the name was carried from an earlier step. */
  tensors: (TensorInfo | undefined)[] = [];
  /** Counts every block added or removed: queries that sort blocks reuse their work while it stands still. */
  changes = 0;
  private freeSlots: Int32Array;
  private nFree = 0;
  private used = 0;

  constructor(initial = 1024) {
    this.capacity = initial;
    this.address = new Float64Array(initial);
    this.size = new Float64Array(initial);
    this.stream = new Float64Array(initial);
    this.time_us = new Float64Array(initial);
    this.serial = new Float64Array(initial);
    this.step = new Uint32Array(initial);
    this.range = new Uint32Array(initial);
    this.phase = new Uint8Array(initial);
    this.category = new Uint8Array(initial);
    this.flags = new Uint8Array(initial);
    this.freeSlots = new Int32Array(initial);
  }

  get count(): number {
    return this.bySlot.size;
  }

  /** A slot for a new block (its columns are the caller's to fill). */
  take(): number {
    this.changes++;
    if (this.nFree > 0) return this.freeSlots[--this.nFree]!;
    if (this.used === this.capacity) this.grow();
    return this.used++;
  }

  /** Give a slot back once its block is gone. */
  release(slot: number): void {
    this.changes++;
    this.names[slot] = undefined;
    this.tensors[slot] = undefined;
    this.flags[slot] = 0;
    this.serial[slot] = -1;
    this.freeSlots[this.nFree++] = slot;
  }

  private grow(): void {
    const n = this.capacity * 2;
    const f64 = (a: Float64Array) => {
      const b = new Float64Array(n);
      b.set(a);
      return b;
    };
    const u32 = (a: Uint32Array) => {
      const b = new Uint32Array(n);
      b.set(a);
      return b;
    };
    const u8 = (a: Uint8Array) => {
      const b = new Uint8Array(n);
      b.set(a);
      return b;
    };
    this.address = f64(this.address);
    this.size = f64(this.size);
    this.stream = f64(this.stream);
    this.time_us = f64(this.time_us);
    this.serial = f64(this.serial);
    this.step = u32(this.step);
    this.range = u32(this.range);
    this.phase = u8(this.phase);
    this.category = u8(this.category);
    this.flags = u8(this.flags);
    const fs = new Int32Array(n);
    fs.set(this.freeSlots);
    this.freeSlots = fs;
    this.capacity = n;
  }

  /** Live slots sorted by address (for segment maps and name lookups; not on the hot path). */
  slotsByAddress(): Int32Array {
    const slots = this.bySlot.values();
    const addr = this.address;
    slots.sort((a, b) => addr[a]! - addr[b]!);
    return slots;
  }

  /** The live slot whose block contains `address`, or -1 (binary search over `sorted`). */
  containing(sorted: Int32Array, address: number): number {
    let lo = 0;
    let hi = sorted.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const s = sorted[mid]!;
      if (this.address[s]! <= address) {
        found = s;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (found >= 0 && address < this.address[found]! + this.size[found]!) return found;
    return -1;
  }
}
