// The caching allocator's large pool, followed through a snapshot's trace, to know the size of
// each block it hands out (block-sizes.ts says why only this pool needs it). Kept as the allocator
// keeps it: each segment a chain of blocks from its start to its end, linked both ways, free or
// allocated. A segment comes as one free block; an alloc takes the front of a free block and cuts
// it only when more than 1 MiB would remain; a completed free merges the block with its free
// neighbours, never across segments (the chain ends there).
//
// What the trace cannot show: a block from before the recording that the trace frees has the size
// of its request rounded, but may reach further, up to the next block known to start. That stretch
// is kept as UNKNOWN after it: the block's own tail or free memory. It is settled when a block is
// handed out inside it (the earlier block ended there), or when the block is freed (the stretch is
// free either way). A block whose size stays unsettled is counted in `inferred`.
// Pure: no I/O.

import { AddressMap } from "./address-map";
import { blockFrom, SMALL_SIZE, type AllocatorRules } from "./block-sizes";

/** The kinds of a chain's block, for the model's loop, which reads the columns in place (B's
 *  members; a const enum is written in as numbers in its own file only). */
export const CHAIN_FREE = 1;
export const CHAIN_LIVE = 2;
export const CHAIN_UNKNOWN = 3;

// A const enum: the transpiler writes its members in as numbers. Module constants cost the JIT a
// scope lookup at each use, which made the per-record methods too large to be inlined (see alloc).
const enum B {
  FREE = 1,
  LIVE = 2,
  UNKNOWN = 3,
  /** No slot. */
  NONE = -1,
}

/** A block that existed before the recording: its size is proven where the final segments hold it. */
export interface SeedBlock {
  address: number;
  size: number;
  known: boolean;
}

/** A block whose size was learnt after its entries were written: the caller rewrites them. */
export interface Resized {
  address: number;
  size: number;
  /** Its alloc entry and free_requested entry (−1: none, or from before the recording). */
  entry: number;
  freeEntry: number;
}

export class LargePoolLayout {
  // The blocks by slot, in typed columns with a free list: no object per block. The live model's
  // loop (DeviceState.allocatorRecords) works on the columns and the index in place for what a
  // run's records do most (a free block at the address handed out, whole or cut: add's link; a
  // block freed, merged with a free neighbour on either side: absorb), a call made from inside it
  // costing every record a third more; it calls alloc, freeMerging and freeCompleted for the
  // rest (no layout there, unknown stretches, unsettled sizes), makes room first (makeRoom) and
  // leaves the index's upkeep to after the record (indexGrown), and reads the columns again after
  // any call here (grow and reindex replace them). test/profiler/chain-sizes.test.ts holds its
  // sizes to this class's on every committed ring.
  addr = new Float64Array(256);
  size = new Float64Array(256);
  kind = new Uint8Array(256);
  /** A LIVE block followed by UNKNOWN whose size is not settled. */
  unsettled = new Uint8Array(256);
  prev = new Int32Array(256);
  next = new Int32Array(256);
  entry = new Int32Array(256);
  freeEntry = new Int32Array(256);
  /** Slots given back (merged blocks), a stack. */
  spare = new Int32Array(256);
  nSpare = 0;
  used = 0;
  /** Start address → slot of every FREE, LIVE and UNKNOWN block, and of blocks since merged into
   *  the one before them: a merge leaves the index as it is (a probe saved on every merge), so an
   *  entry counts only where its slot still starts there (find). Rebuilt once stale entries
   *  outnumber the blocks (reindexAt), so it stays within a few times the blocks alive. */
  at = new AddressMap(256);
  reindexAt = 1024;
  /** The slot of the block the last alloc laid out, −1 where it had no layout to go by: the caller
   *  keeps it with its block and gives it back to freeCompleted, which then needs no lookup. */
  lastSlot = B.NONE;
  /** UNKNOWN stretches there are. With none, an alloc that finds no free block big enough at its
   *  address has nothing to go by (allocAt): the model's loop sizes it so itself, without a call. */
  unknowns = 0;
  /** UNKNOWN slots as seeded (in address order once sorted) and their starts then. */
  private unknownAt: number[] = [];
  private unknownStart: number[] = [];
  private unknownSorted = true;
  /** Blocks whose size is not settled (their request rounded is counted), each once. */
  inferred = 0;
  /** Allocs the layout sized with certainty that the final segments size otherwise. */
  disagreements = 0;
  readonly resized: Resized[] = [];

  constructor(private readonly rules: AllocatorRules) {}

  /**
   * A segment that existed before the recording, with the blocks it held then, those inside it
   * only, in address order. Between known blocks lies free memory, one free block a stretch (the
   * allocator merges free neighbours); after a block of unproven size, an UNKNOWN stretch.
   */
  seed(start: number, size: number, blocks: readonly SeedBlock[]): void {
    this.clear(start, size);
    let cursor = start;
    let last = B.NONE;
    const stretch = (to: number) => {
      if (to === cursor) return;
      const open = last !== B.NONE && this.unsettled[last] === 1;
      last = this.add(cursor, to - cursor, open ? B.UNKNOWN : B.FREE, last);
    };
    for (const b of blocks) {
      if (b.address < cursor || b.address + b.size > start + size) continue; // inconsistent: left out
      stretch(b.address);
      if (last !== B.NONE && this.unsettled[last] === 1) this.settle(last, 0); // the next block starts where it ends
      last = this.add(b.address, b.size, B.LIVE, last);
      if (!b.known) {
        this.unsettled[last] = 1;
        this.inferred++;
      }
      cursor = b.address + b.size;
    }
    stretch(start + size);
    if (last !== B.NONE && this.unsettled[last] === 1) this.settle(last, 0); // it ends where the segment does
  }

  /** Room for `n` more blocks without the columns growing (the model's loop cuts free blocks in
   *  place, up to one for each alloc of its run). */
  makeRoom(n: number): void {
    while (this.nSpare + this.addr.length - this.used < n) this.grow();
  }

  /** The index after the model's loop put an entry in it in place (as add does, at.set and the
   *  reindex): rebuilt where half full, anew where its stale entries outnumber the blocks too far. */
  indexGrown(): void {
    if (this.at.used * 2 > this.at.mask) this.at.rebuild();
    if (this.at.size > this.reindexAt) this.reindex();
  }

  segmentAlloc(start: number, size: number): void {
    this.clear(start, size); // a stale layout there (its segment_free never came)
    this.add(start, size, B.FREE, B.NONE);
  }

  /** The allocator gives back only a segment that is one free block; anything else the layout
   *  held there goes with it. */
  segmentFree(start: number, size: number): void {
    this.clear(start, size);
  }

  /**
   * An alloc at `address` of a request rounded to `rounded`: the block's size. `exact`: its size
   * where the final segments state it (alive at the end), else NaN. `entry`: the trace entry.
   */
  alloc(address: number, rounded: number, exact: number, entry: number): number {
    // The common case, a free block taken whole, kept under the JIT's size for inlining into the
    // caller's loop (FTL inlines a callee of bytecode cost ≤ 170; the whole method is ~500, and a
    // call of it cost the live model ~10 ns a large block: bench/results/ingest-ring-exact-blocks).
    const s = this.find(address);
    if (s !== B.NONE && exact !== exact && this.fitsWhole(s, rounded)) return this.take(s);
    return this.allocAt(address, rounded, exact, entry, s);
  }

  /** Slot `s` is a free block that a request rounded to `rounded` takes whole (it would leave no
   *  more than 1 MiB, which the allocator never cuts off, whatever max_split_size says). */
  private fitsWhole(s: number, rounded: number): boolean {
    const f = this.size[s]!;
    return this.kind[s] === B.FREE && f >= rounded && f - rounded <= SMALL_SIZE;
  }

  /** Free slot `s` handed out whole: its size. (A block the trace allocates is never unsettled,
   *  so its entries are never read, see settle.) */
  private take(s: number): number {
    this.kind[s] = B.LIVE;
    this.lastSlot = s;
    return this.size[s]!;
  }

  /** alloc's every case, `s` the slot find gave for `address`. */
  private allocAt(address: number, rounded: number, exact: number, entry: number, s: number): number {
    if (s === B.NONE && this.unknowns > 0) s = this.inUnknown(address) ?? B.NONE;
    if (s !== B.NONE && this.kind[s] === B.UNKNOWN) s = this.freeUnknown(s);
    // no layout here (a segment the trace never showed), or one the trace contradicts (a block
    // already there, a free block too small): nothing to go by
    if (s === B.NONE || this.kind[s] !== B.FREE || (this.size[s]! < rounded && exact !== exact)) {
      this.lastSlot = B.NONE;
      if (exact === exact) return exact;
      this.inferred++;
      return rounded;
    }
    this.lastSlot = s;
    const f = this.size[s]!;
    let size = blockFrom(f, rounded, this.rules.maxSplitSize);
    if (exact === exact) {
      if (exact !== size) this.disagreements++;
      size = Math.min(exact, f);
    }
    this.kind[s] = B.LIVE;
    this.entry[s] = entry;
    this.freeEntry[s] = B.NONE;
    if (size < f) this.cutAt(s, address, size);
    return exact === exact ? exact : size;
  }

  /** Live slot `s` at `address`, a free block until now, keeps its first `size` bytes: the rest
   *  is a free block after it. */
  private cutAt(s: number, address: number, size: number): void {
    const f = this.size[s]!;
    this.size[s] = size;
    this.add(address + size, f - size, B.FREE, s);
  }

  /** free_requested: the block's size (it stays in place until its free completes). */
  freeRequested(address: number, entry: number): number | undefined {
    const s = this.find(address);
    if (s === B.NONE || this.kind[s] !== B.LIVE) return undefined;
    this.freeEntry[s] = entry;
    return this.size[s];
  }

  /** free_completed: the block becomes free and merges with its free neighbours in the segment.
   *  `slot`: the block's slot as lastSlot gave it at its alloc, where the caller kept it (−1:
   *  none); taken only where it still holds this block, else the address is looked up. */
  freeCompleted(address: number, slot = B.NONE): number | undefined {
    // The common case, small enough to be inlined (see alloc): `slot` holds the block, and no
    // free neighbour is there to merge with. (A slot left from before, another block's or a
    // replaced layout's, holds another address or no live block: then the address is looked up.)
    const s = this.holds(slot, address) ? slot : this.find(address);
    if (s === B.NONE || this.kind[s] !== B.LIVE) return undefined;
    return this.alone(s) ? this.freeAlone(s) : this.freeMerging(s);
  }

  /** `slot` is the live block at `address`. */
  private holds(slot: number, address: number): boolean {
    return slot >= 0 && slot < this.kind.length && this.kind[slot] === B.LIVE && this.addr[slot] === address;
  }

  /** LIVE slot `s` has no free or unknown neighbour and a settled size: freed, it merges with nothing. */
  private alone(s: number): boolean {
    const kind = this.kind;
    const n = this.next[s]!;
    const p = this.prev[s]!;
    return (n === B.NONE || kind[n] === B.LIVE) && (p === B.NONE || kind[p] !== B.FREE) && this.unsettled[s] === 0;
  }

  private freeAlone(s: number): number {
    this.kind[s] = B.FREE;
    return this.size[s]!;
  }

  /** LIVE slot `s` freed, merged with its free neighbours; its size. */
  freeMerging(s: number): number {
    const size = this.size[s]!;
    this.kind[s] = B.FREE;
    this.unsettled[s] = 0; // if unsettled, it stays counted: its own size is still unknown
    let n = this.next[s]!;
    // the stretch after a block of unknown end is its tail or free: free either way now
    if (n !== B.NONE && this.kind[n] === B.UNKNOWN) n = this.absorb(s, n);
    if (n !== B.NONE && this.kind[n] === B.FREE) this.absorb(s, n);
    const p = this.prev[s]!;
    if (p !== B.NONE && this.kind[p] === B.FREE) this.absorb(p, s);
    return size;
  }

  /** The free blocks, in address order (tests; not the per-entry path). */
  freeBlocks(): { address: number; size: number }[] {
    const out: { address: number; size: number }[] = [];
    for (let k = 0; k < this.used; k++) if (this.kind[k] === B.FREE) out.push({ address: this.addr[k]!, size: this.size[k]! });
    return out.sort((a, b) => a.address - b.address);
  }

  /** A block after slot `after` (NONE: a chain's first), linked in; its slot. */
  private add(address: number, size: number, kind: number, after: number): number {
    let s: number;
    if (this.nSpare > 0) s = this.spare[--this.nSpare]!;
    else {
      if (this.used === this.addr.length) this.grow();
      s = this.used++;
    }
    this.addr[s] = address;
    this.size[s] = size;
    this.kind[s] = kind;
    this.unsettled[s] = 0;
    this.entry[s] = B.NONE;
    this.freeEntry[s] = B.NONE;
    this.prev[s] = after;
    const n = after === B.NONE ? B.NONE : this.next[after]!;
    this.next[s] = n;
    if (after !== B.NONE) this.next[after] = s;
    if (n !== B.NONE) this.prev[n] = s;
    this.at.set(address, s);
    if (this.at.size > this.reindexAt) this.reindex();
    if (kind === B.UNKNOWN) {
      this.unknowns++;
      this.unknownAt.push(s);
      this.unknownSorted = false;
    }
    return s;
  }

  /** Slot `b`, the block right after `a`, becomes part of `a`; the slot after `a` now. */
  private absorb(a: number, b: number): number {
    this.size[a]! += this.size[b]!;
    const n = this.next[b]!;
    this.next[a] = n;
    if (n !== B.NONE) this.prev[n] = a;
    this.drop(b);
    return n;
  }

  /** Its entry in the index stays until a block starts there again or a reindex: find tells. */
  private drop(s: number): void {
    if (this.kind[s] === B.UNKNOWN) this.unknowns--;
    this.kind[s] = 0;
    this.spare[this.nSpare++] = s;
  }

  /** The slot of the block that starts at `address`, or NONE. */
  private find(address: number): number {
    const s = this.at.get(address);
    return s !== undefined && this.kind[s] !== 0 && this.addr[s] === address ? s : B.NONE;
  }

  /** The index anew from the blocks there are: entries of merged blocks gone. */
  private reindex(): void {
    const at = new AddressMap(Math.max(256, this.used - this.nSpare));
    for (let k = 0; k < this.used; k++) if (this.kind[k] !== 0) at.set(this.addr[k]!, k);
    this.at = at;
    this.reindexAt = Math.max(1024, 4 * at.size);
  }

  /** Forget the blocks of the segment at `start`: given back, or made there anew. Each block is
   *  dropped once, so however the trace repeats this, the work stays linear. */
  private clear(start: number, size: number): void {
    const first = this.find(start);
    if (first === B.NONE) return; // nothing known there
    const p = this.prev[first]!;
    if (p !== B.NONE) this.next[p] = B.NONE; // an inconsistent trace: what lies before keeps its own chain
    let s: number = first;
    while (s !== B.NONE && this.addr[s]! < start + size) {
      const n: number = this.next[s]!;
      this.drop(s);
      s = n;
    }
    if (s !== B.NONE) this.prev[s] = B.NONE;
  }

  /** The UNKNOWN stretch strictly containing `address`, split there: its slot from `address` on.
   *  Stretches come only from seeds, before the trace: their starts, sorted once, are searched. */
  private inUnknown(address: number): number | undefined {
    if (!this.unknownSorted) {
      this.unknownAt.sort((x, y) => this.addr[x]! - this.addr[y]!);
      this.unknownStart = this.unknownAt.map((k) => this.addr[k]!);
      this.unknownSorted = true;
    }
    let lo = 0;
    let hi = this.unknownStart.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.unknownStart[mid]! <= address) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return undefined;
    // a stretch only shrinks from its front, so the last one starting at or before `address` is the only candidate
    const k = this.unknownAt[lo - 1]!;
    const a = this.addr[k]!;
    if (this.kind[k] !== B.UNKNOWN || address <= a || address >= a + this.size[k]!) return undefined;
    // a block is handed out here: the block before the stretch reached this far
    const owner = this.prev[k]!;
    const tail = address - a;
    this.size[k]! -= tail;
    this.at.remove(a);
    this.addr[k] = address;
    this.at.set(address, k);
    if (owner !== B.NONE) this.settle(owner, tail);
    return k;
  }

  /** A block is handed out at the start of UNKNOWN slot `u`: the stretch is free memory (merged
   *  with a free block after it, as the allocator would have), and the block before it ended there. */
  private freeUnknown(u: number): number {
    const owner = this.prev[u]!;
    if (owner !== B.NONE && this.kind[owner] === B.LIVE) this.settle(owner, 0);
    this.kind[u] = B.FREE;
    this.unknowns--;
    const n = this.next[u]!;
    if (n !== B.NONE && this.kind[n] === B.FREE) this.absorb(u, n);
    return u;
  }

  /** LIVE slot `s` of unsettled size turns out `extra` bytes longer than counted: settled. */
  private settle(s: number, extra: number): void {
    if (this.unsettled[s] !== 1) return;
    this.unsettled[s] = 0;
    this.inferred--;
    if (extra === 0) return;
    this.size[s]! += extra;
    this.resized.push({ address: this.addr[s]!, size: this.size[s]!, entry: this.entry[s]!, freeEntry: this.freeEntry[s]! });
  }

  private grow(): void {
    const n = this.addr.length * 2;
    const copy = <T extends Float64Array | Int32Array | Uint8Array>(a: T, make: (n: number) => T): T => {
      const b = make(n);
      b.set(a as never);
      return b;
    };
    this.addr = copy(this.addr, (k) => new Float64Array(k));
    this.size = copy(this.size, (k) => new Float64Array(k));
    this.kind = copy(this.kind, (k) => new Uint8Array(k));
    this.unsettled = copy(this.unsettled, (k) => new Uint8Array(k));
    this.prev = copy(this.prev, (k) => new Int32Array(k));
    this.next = copy(this.next, (k) => new Int32Array(k));
    this.entry = copy(this.entry, (k) => new Int32Array(k));
    this.freeEntry = copy(this.freeEntry, (k) => new Int32Array(k));
    this.spare = copy(this.spare, (k) => new Int32Array(k));
  }
}
