// Live blocks of one device: address → slot in typed-array columns, and their running sums (bytes
// and blocks by category, bytes by range, blocks of the large pool). The hot path allocates no
// object per event: a hash table from address to slot number, a free list of slots, and columns
// that grow by doubling only when more blocks are alive at once than ever before.

import { AddressMap } from "./address-map";
import { N_CAT } from "./categories";

/** The caching allocator's small-pool limit (kSmallSize): requests above it come from large segments. */
export const LARGE = 1024 * 1024;
/** The step stamped on blocks inserted by a resync (their step is unknown). */
export const RESYNCED_STEP = 0xffffffff;
/** flags: the category came from the agent's names; the block was inserted by a resync (no alloc seen). */
export const FROM_NAMES = 1;
export const RESYNCED = 2;
/** flags: the block was allocated before the agent attached; an attach's seed says so (seed.ts). */
export const BEFORE_ATTACH = 3;

/** `a` copied into one twice as long as often as needed to hold index `i` (arrays by range id). */
export function grownToHold(a: Float64Array, i: number): Float64Array<ArrayBuffer> {
  let n = a.length;
  while (n <= i) n *= 2;
  const out = new Float64Array(n);
  out.set(a);
  return out;
}

/** The block a request gets (the rule's rounding, stated with the totals). */
export { blockSize } from "./totals";

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
  /** The stack that allocated it (model.stacks' id; 0: unknown). */
  stack: Uint32Array;
  /** FROM_NAMES, RESYNCED, BEFORE_ATTACH, or 0. */
  flags: Uint8Array;
  /** 1: counted at its request rounded, its segment's chain unknown (device.ts); torch's block may
   *  be up to 1 MiB larger. A column, not a set of addresses: a free reads it with no hashing. */
  unsized: Uint8Array;
  /** Live blocks with `unsized` set. */
  unsizedCount = 0;
  /** A large block's slot in its segment's chain (LargePoolLayout.lastSlot at its alloc, −1:
   *  none): its free hands it back, so the chain needs no lookup of the address. */
  chain: Int32Array;
  /** Tensor names from the agent, by slot (undefined where unknown). As long as the columns and
   *  filled with undefined: a JS array given a few names at far slots turns sparse, and then every
   *  free's read of it was a lookup in a map (24 ns against 0.8, a real job's named model: its
   *  release, its free's log at the peak). */
  names: (string | undefined)[];
  /** The named tensor's shape and dtype, and whether the name was carried from an earlier step. */
  tensors: (TensorInfo | undefined)[];
  /** Counts every block added or removed: queries that sort blocks reuse their work while it stands still. */
  changes = 0;
  /** Live bytes and blocks by category code. */
  readonly bytesByCat = new Float64Array(N_CAT);
  readonly countByCat = new Float64Array(N_CAT);
  /** Live bytes by the range (id) they were allocated in. */
  bytesByRange = new Float64Array(64);
  /** Live blocks above LARGE. Such a block may be up to 1 MiB larger than the request the trace
   *  carries (a free block is not split for a remainder ≤ 1 MiB), so allocated from the events may
   *  fall short of the allocator's by at most 1 MiB for each. */
  large = 0;
  /** Live blocks a resync added that no recorded alloc accounts for. */
  resynced = 0;
  /** Resynced blocks a snapshot has since vouched for: they no longer count in `resynced`. */
  private readonly settled = new Set<number>();
  /** The slot add() took the address from (its free was lost), still counted: the caller reads it,
   *  then discards it. −1 when the address was free. */
  displaced = -1;
  // The slots given back (a stack), and slots ever used. A run of allocator records takes and
  // gives back slots in its loop (DeviceState.allocatorRecords, after makeRoom), as take and
  // release do, and hands nFree back before it calls anything that may take or release one.
  freeSlots: Int32Array;
  nFree = 0;
  used = 0;

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
    this.stack = new Uint32Array(initial);
    this.flags = new Uint8Array(initial);
    this.unsized = new Uint8Array(initial);
    this.chain = new Int32Array(initial);
    this.freeSlots = new Int32Array(initial);
    this.names = new Array<string | undefined>(initial).fill(undefined);
    this.tensors = new Array<TensorInfo | undefined>(initial).fill(undefined);
  }

  get count(): number {
    return this.bySlot.size;
  }

  /** Slots handed out and not given back: the live blocks, and the freed ones the log of frees at
   *  the peak still holds (at-peak.ts). */
  get taken(): number {
    return this.used - this.nFree;
  }

  /** Inserted by a resync: when and where it was allocated is unknown. */
  isResynced(slot: number): boolean {
    return this.flags[slot] === RESYNCED;
  }

  /** Bytes of the live blocks. */
  liveBytes(): number {
    let s = 0;
    for (let c = 0; c < N_CAT; c++) s += this.bytesByCat[c]!;
    return s;
  }

  /** A new live block at `address` (see `displaced` for the one it replaces). Returns its slot. */
  add(address: number, size: number, stream: number, t: number, serial: number, step: number, range: number, phase: number, category: number, flags: number, stack = 0): number {
    const slot = this.take();
    this.displaced = this.bySlot.put(address, slot);
    this.address[slot] = address;
    this.size[slot] = size;
    this.stream[slot] = stream;
    this.time_us[slot] = t;
    this.serial[slot] = serial;
    this.step[slot] = step;
    this.range[slot] = range;
    this.phase[slot] = phase;
    this.category[slot] = category;
    this.flags[slot] = flags;
    this.stack[slot] = stack;
    if (size > LARGE) this.large++;
    if (flags === RESYNCED) this.resynced++;
    this.bytesByCat[category]! += size;
    this.countByCat[category]!++;
    this.holdRange(range);
    this.bytesByRange[range]! += size;
    return slot;
  }

  /** A block the model never saw allocated (records were lost) that the agent's names or a snapshot
   *  show alive: its step, phase and range are unknown. Returns its slot. */
  addResynced(address: number, size: number, category: number, name: string | undefined, t: number): number {
    const slot = this.add(address, size, 0, t, 0, RESYNCED_STEP, 0, 0, category, RESYNCED);
    this.names[slot] = name;
    return slot;
  }

  /** The live slot at `address`, taken out of the address map (its columns and sums stay until
   *  discard), or −1. */
  remove(address: number): number {
    return this.bySlot.remove(address);
  }

  /** Take a block out of the sums and give its slot back (the address map no longer points at it);
   *  with `keep`, the slot stays taken (the log of frees at the peak holds it, at-peak.ts). */
  discard(slot: number, keep = false): void {
    const size = this.size[slot]!;
    const cat = this.category[slot]!;
    this.bytesByCat[cat]! -= size;
    this.countByCat[cat]!--;
    if (size > LARGE) this.large--;
    if (this.flags[slot] === RESYNCED && !this.settled.delete(slot)) this.resynced--;
    this.bytesByRange[this.range[slot]!]! -= size;
    this.settleSize(slot);
    if (keep) this.changes++;
    else this.release(slot);
  }

  /** The block leaves the live ones: no longer counted among those of unknown size. */
  settleSize(slot: number): void {
    if (this.unsized[slot] === 1) {
      this.unsized[slot] = 0;
      this.unsizedCount--;
    }
  }

  /** Every live block has torch's size now (a snapshot or a seed gave them). */
  clearUnsized(): void {
    this.unsized.fill(0);
    this.unsizedCount = 0;
  }

  /** Remove a live block entirely. */
  forget(slot: number): void {
    this.bySlot.delete(this.address[slot]!);
    this.discard(slot);
  }

  /** A live block's size corrected (a seed knows the allocator's block size), its sums with it. */
  resize(slot: number, size: number): void {
    const old = this.size[slot]!;
    const d = size - old;
    this.bytesByCat[this.category[slot]!]! += d;
    this.bytesByRange[this.range[slot]!]! += d;
    this.large += (size > LARGE ? 1 : 0) - (old > LARGE ? 1 : 0);
    this.size[slot] = size;
    this.changes++;
  }

  /** Move a live block to another category, its sums with it. */
  recategorize(slot: number, to: number): void {
    const from = this.category[slot]!;
    if (from === to) return;
    const size = this.size[slot]!;
    this.bytesByCat[from]! -= size;
    this.countByCat[from]!--;
    this.bytesByCat[to]! += size;
    this.countByCat[to]!++;
    this.category[slot] = to;
  }

  /** Move many blocks' sums from one category to others at once (their columns already changed). */
  moveSums(from: number, to: number, bytes: number, blocks: number): void {
    this.bytesByCat[from]! -= bytes;
    this.countByCat[from]! -= blocks;
    this.bytesByCat[to]! += bytes;
    this.countByCat[to]! += blocks;
  }

  /** Forget every sum of resyncs (a snapshot made the detail whole again). The blocks keep their
   *  flag (their origin stays unknown); freeing one later no longer counts against the sum. */
  clearResynced(): void {
    for (const slot of this.bySlot.values()) if (this.flags[slot] === RESYNCED) this.settled.add(slot);
    this.resynced = 0;
  }


  /** bytesByRange has room for range id `range`. */
  holdRange(range: number): void {
    if (range >= this.bytesByRange.length) this.bytesByRange = grownToHold(this.bytesByRange, range);
  }

  /** Room for `n` more blocks without the columns growing (they grow now where they must): whoever
   *  then takes at most `n` slots may keep the columns it read. */
  makeRoom(n: number): void {
    while (this.nFree + this.capacity - this.used < n) this.grow();
  }

  /** A slot for a new block (its columns are the caller's to fill; they grow when full). */
  take(): number {
    this.changes++;
    if (this.nFree > 0) return this.freeSlots[--this.nFree]!;
    if (this.used === this.capacity) this.grow();
    return this.used++;
  }

  /** Give a slot back once its block is gone (out of the sums already). */
  release(slot: number): void {
    this.changes++;
    // Most blocks were never named: a store only where there is something.
    if (this.names[slot] !== undefined) this.names[slot] = undefined;
    if (this.tensors[slot] !== undefined) this.tensors[slot] = undefined;
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
    this.stack = u32(this.stack);
    this.phase = u8(this.phase);
    this.category = u8(this.category);
    this.flags = u8(this.flags);
    this.unsized = u8(this.unsized);
    const chain = new Int32Array(n);
    chain.set(this.chain);
    this.chain = chain;
    const fs = new Int32Array(n);
    fs.set(this.freeSlots);
    this.freeSlots = fs;
    for (let i = this.capacity; i < n; i++) {
      this.names.push(undefined);
      this.tensors.push(undefined);
    }
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
