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

import { AddressMap } from "../profiler/address-map";
import { SMALL_SIZE, type AllocatorRules } from "./block-sizes";

const FREE = 1;
const LIVE = 2;
const UNKNOWN = 3;
const NONE = -1;

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
  // The blocks by slot, in typed columns with a free list: no object per block.
  private addr = new Float64Array(256);
  private size = new Float64Array(256);
  private kind = new Uint8Array(256);
  /** A LIVE block followed by UNKNOWN whose size is not settled. */
  private unsettled = new Uint8Array(256);
  private prev = new Int32Array(256);
  private next = new Int32Array(256);
  private entry = new Int32Array(256);
  private freeEntry = new Int32Array(256);
  private spare: number[] = [];
  private used = 0;
  /** Start address → slot of every FREE, LIVE and UNKNOWN block. */
  private readonly at = new AddressMap(256);
  private unknowns = 0;
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
    let last = NONE;
    const stretch = (to: number) => {
      if (to === cursor) return;
      const open = last !== NONE && this.unsettled[last] === 1;
      last = this.add(cursor, to - cursor, open ? UNKNOWN : FREE, last);
    };
    for (const b of blocks) {
      if (b.address < cursor || b.address + b.size > start + size) continue; // inconsistent: left out
      stretch(b.address);
      if (last !== NONE && this.unsettled[last] === 1) this.settle(last, 0); // the next block starts where it ends
      last = this.add(b.address, b.size, LIVE, last);
      if (!b.known) {
        this.unsettled[last] = 1;
        this.inferred++;
      }
      cursor = b.address + b.size;
    }
    stretch(start + size);
    if (last !== NONE && this.unsettled[last] === 1) this.settle(last, 0); // it ends where the segment does
  }

  segmentAlloc(start: number, size: number): void {
    this.clear(start, size); // a stale layout there (its segment_free never came)
    this.add(start, size, FREE, NONE);
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
    let s = this.at.get(address);
    if (s === undefined && this.unknowns > 0) s = this.inUnknown(address);
    if (s !== undefined && this.kind[s] === UNKNOWN) s = this.freeUnknown(s);
    // no layout here (a segment the trace never showed), or one the trace contradicts (a block
    // already there, a free block too small): nothing to go by
    if (s === undefined || this.kind[s] !== FREE || (this.size[s]! < rounded && exact !== exact)) {
      if (exact === exact) return exact;
      this.inferred++;
      return rounded;
    }
    const f = this.size[s]!;
    const cut = rounded < this.rules.maxSplitSize && f - rounded > SMALL_SIZE;
    let size = cut ? rounded : f;
    if (exact === exact) {
      if (exact !== size) this.disagreements++;
      size = Math.min(exact, f);
    }
    this.kind[s] = LIVE;
    this.entry[s] = entry;
    this.freeEntry[s] = NONE;
    if (size < f) {
      this.size[s] = size;
      this.add(address + size, f - size, FREE, s);
    }
    return exact === exact ? exact : size;
  }

  /** free_requested: the block's size (it stays in place until its free completes). */
  freeRequested(address: number, entry: number): number | undefined {
    const s = this.at.get(address);
    if (s === undefined || this.kind[s] !== LIVE) return undefined;
    this.freeEntry[s] = entry;
    return this.size[s];
  }

  /** free_completed: the block becomes free and merges with its free neighbours in the segment. */
  freeCompleted(address: number): number | undefined {
    const s = this.at.get(address);
    if (s === undefined || this.kind[s] !== LIVE) return undefined;
    const size = this.size[s]!;
    this.kind[s] = FREE;
    this.unsettled[s] = 0; // if unsettled, it stays counted: its own size is still unknown
    let n = this.next[s]!;
    // the stretch after a block of unknown end is its tail or free: free either way now
    if (n !== NONE && this.kind[n] === UNKNOWN) n = this.absorb(s, n);
    if (n !== NONE && this.kind[n] === FREE) this.absorb(s, n);
    const p = this.prev[s]!;
    if (p !== NONE && this.kind[p] === FREE) this.absorb(p, s);
    return size;
  }

  /** The free blocks, in address order (tests; not the per-entry path). */
  freeBlocks(): { address: number; size: number }[] {
    const out: { address: number; size: number }[] = [];
    for (let k = 0; k < this.used; k++) if (this.kind[k] === FREE) out.push({ address: this.addr[k]!, size: this.size[k]! });
    return out.sort((a, b) => a.address - b.address);
  }

  /** A block after slot `after` (NONE: a chain's first), linked in; its slot. */
  private add(address: number, size: number, kind: number, after: number): number {
    let s = this.spare.pop();
    if (s === undefined) {
      if (this.used === this.addr.length) this.grow();
      s = this.used++;
    }
    this.addr[s] = address;
    this.size[s] = size;
    this.kind[s] = kind;
    this.unsettled[s] = 0;
    this.entry[s] = NONE;
    this.freeEntry[s] = NONE;
    this.prev[s] = after;
    const n = after === NONE ? NONE : this.next[after]!;
    this.next[s] = n;
    if (after !== NONE) this.next[after] = s;
    if (n !== NONE) this.prev[n] = s;
    this.at.set(address, s);
    if (kind === UNKNOWN) {
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
    if (n !== NONE) this.prev[n] = a;
    this.drop(b);
    return n;
  }

  private drop(s: number): void {
    if (this.at.get(this.addr[s]!) === s) this.at.remove(this.addr[s]!);
    if (this.kind[s] === UNKNOWN) this.unknowns--;
    this.kind[s] = 0;
    this.spare.push(s);
  }

  /** Forget the blocks of the segment at `start`: given back, or made there anew. Each block is
   *  dropped once, so however the trace repeats this, the work stays linear. */
  private clear(start: number, size: number): void {
    const first = this.at.get(start);
    if (first === undefined) return; // nothing known there
    const p = this.prev[first]!;
    if (p !== NONE) this.next[p] = NONE; // an inconsistent trace: what lies before keeps its own chain
    let s: number = first;
    while (s !== NONE && this.addr[s]! < start + size) {
      const n: number = this.next[s]!;
      this.drop(s);
      s = n;
    }
    if (s !== NONE) this.prev[s] = NONE;
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
    if (this.kind[k] !== UNKNOWN || address <= a || address >= a + this.size[k]!) return undefined;
    // a block is handed out here: the block before the stretch reached this far
    const owner = this.prev[k]!;
    const tail = address - a;
    this.size[k]! -= tail;
    this.at.remove(a);
    this.addr[k] = address;
    this.at.set(address, k);
    if (owner !== NONE) this.settle(owner, tail);
    return k;
  }

  /** A block is handed out at the start of UNKNOWN slot `u`: the stretch is free memory (merged
   *  with a free block after it, as the allocator would have), and the block before it ended there. */
  private freeUnknown(u: number): number {
    const owner = this.prev[u]!;
    if (owner !== NONE && this.kind[owner] === LIVE) this.settle(owner, 0);
    this.kind[u] = FREE;
    this.unknowns--;
    const n = this.next[u]!;
    if (n !== NONE && this.kind[n] === FREE) this.absorb(u, n);
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
  }
}
