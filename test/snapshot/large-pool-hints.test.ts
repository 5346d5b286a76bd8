// The large pool's chains (src/profiler/large-pool.ts) through a long random run against a plain
// model of the allocator's rule (each segment an array of blocks: an alloc takes the front of a
// free block and cuts it only where more than 1 MiB would remain, a free merges with free
// neighbours). The live model hands each free the slot its alloc got (lastSlot): that path, a
// path given wrong slots (another block's, out of range) and a path given none must all give the
// plain model's sizes, through many thousand splits at new addresses (so the address index, which
// merges leave stale, is rebuilt again and again), allocs where no block starts (a start merged
// away among them) and segments given back and made anew.
import { expect, test } from "bun:test";
import { DEFAULT_RULES, SMALL_SIZE } from "../../src/profiler/block-sizes";
import { LargePoolLayout } from "../../src/profiler/large-pool";

interface Block {
  address: number;
  size: number;
  free: boolean;
}

const MIB = 1024 * 1024;

/** The allocator's rule on a segment's blocks, in address order: the block's size. */
function plainAlloc(blocks: Block[], k: number, rounded: number): number {
  const b = blocks[k]!;
  b.free = false;
  if (b.size - rounded > SMALL_SIZE) {
    blocks.splice(k + 1, 0, { address: b.address + rounded, size: b.size - rounded, free: true });
    b.size = rounded;
  }
  return b.size;
}

function plainFree(blocks: Block[], k: number): number {
  const b = blocks[k]!;
  const size = b.size;
  b.free = true;
  if (blocks[k + 1]?.free) b.size += blocks.splice(k + 1, 1)[0]!.size;
  if (k > 0 && blocks[k - 1]!.free) blocks[k - 1]!.size += blocks.splice(k, 1)[0]!.size;
  return size;
}

test("the chains give the allocator's sizes with the caller's slots, wrong slots and none, through rebuilt indexes", () => {
  let seed = 36;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
  const kept = new LargePoolLayout(DEFAULT_RULES); // each free given its alloc's slot
  const wrong = new LargePoolLayout(DEFAULT_RULES); // each given a slot of another block, or out of range
  const none = new LargePoolLayout(DEFAULT_RULES); // no slot: every free looks its address up
  const segments: { start: number; blocks: Block[]; slots: Map<number, number> }[] = [];
  let base = 0x7f00_0000_0000;
  const newSegment = (k: number) => {
    const size = (20 + Math.floor(rand() * 200)) * MIB;
    const start = base;
    base += 1024 * MIB;
    for (const l of [kept, wrong, none]) l.segmentAlloc(start, size);
    segments[k] = { start, blocks: [{ address: start, size, free: true }], slots: new Map() };
  };
  for (let k = 0; k < 6; k++) newSegment(k);
  let splits = 0;
  let merges = 0;
  let contradicted = 0;
  /** Block starts merged away. */
  const gone = new Set<number>();
  for (let op = 0; op < 60_000; op++) {
    const k = Math.floor(rand() * segments.length);
    const g = segments[k]!;
    if (rand() < 0.002) {
      // the segment given back (its blocks with it, as an emptied cache does) and another made
      for (const l of [kept, wrong, none]) l.segmentFree(g.start, g.blocks.reduce((s, b) => s + b.size, 0));
      newSegment(k);
      continue;
    }
    if (rand() < 0.01) {
      // an alloc where no block starts (a trace the chains contradict: a start since merged
      // away, or any address inside a block): nothing to go by, the request rounded, counted
      const starts = new Set(g.blocks.map((b) => b.address));
      const inside = g.blocks[Math.floor(rand() * g.blocks.length)]!;
      const address = [...gone].find((a) => a > inside.address && a < inside.address + inside.size && !starts.has(a)) ?? inside.address + 512;
      if (address < inside.address + inside.size) {
        for (const l of [kept, wrong, none]) expect(l.alloc(address, SMALL_SIZE + 512, NaN, -1)).toBe(SMALL_SIZE + 512);
        contradicted++;
      }
      continue;
    }
    const live = g.blocks.flatMap((b, i) => (b.free ? [] : [i]));
    const free = g.blocks.flatMap((b, i) => (b.free && b.size > SMALL_SIZE + 512 ? [i] : []));
    if (free.length > 0 && (live.length === 0 || rand() < 0.5)) {
      const i = free[Math.floor(rand() * free.length)]!;
      const f = g.blocks[i]!.size;
      // a request that leaves up to 1 MiB (taken whole) or more (cut), 512-byte multiples above 1 MiB
      const rounded = rand() < 0.5 ? Math.max(SMALL_SIZE + 512, f - Math.floor(rand() * 2048) * 512) : SMALL_SIZE + 512 * Math.ceil((rand() * (f - SMALL_SIZE)) / 512);
      const address = g.blocks[i]!.address;
      const n = g.blocks.length;
      const want = plainAlloc(g.blocks, i, Math.min(rounded, f));
      if (g.blocks.length > n) splits++;
      expect(kept.alloc(address, Math.min(rounded, f), NaN, -1)).toBe(want);
      g.slots.set(address, kept.lastSlot);
      expect(wrong.alloc(address, Math.min(rounded, f), NaN, -1)).toBe(want);
      expect(none.alloc(address, Math.min(rounded, f), NaN, -1)).toBe(want);
    } else if (live.length > 0) {
      const i = live[Math.floor(rand() * live.length)]!;
      const address = g.blocks[i]!.address;
      const n = g.blocks.length;
      const starts = g.blocks.map((b) => b.address);
      const want = plainFree(g.blocks, i);
      if (g.blocks.length < n) merges++;
      for (const a of starts) if (!g.blocks.some((b) => b.address === a)) gone.add(a);
      expect(kept.freeCompleted(address, g.slots.get(address)!)).toBe(want);
      const other = rand() < 0.5 ? Math.floor(rand() * 4096) : 1 << 30;
      expect(wrong.freeCompleted(address, other)).toBe(want);
      expect(none.freeCompleted(address)).toBe(want);
    }
  }
  // the run did what it is meant to: many cuts at new addresses, many merges
  expect(splits).toBeGreaterThan(5_000);
  expect(merges).toBeGreaterThan(5_000);
  expect(contradicted).toBeGreaterThan(100);
  expect(gone.size).toBeGreaterThan(1_000);
  for (const l of [kept, wrong, none]) {
    expect(l.inferred).toBe(contradicted);
    const free = segments.flatMap((g) => g.blocks.filter((b) => b.free).map((b) => ({ address: b.address, size: b.size })));
    expect(l.freeBlocks()).toEqual(free.sort((a, b) => a.address - b.address));
  }
});
