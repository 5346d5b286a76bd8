// The segment map of a device: the caching allocator's segments (cudaMalloc'd or mapped ranges)
// with the live blocks inside them and the free ranges between them. A query, not per event:
// it sorts segments and blocks by address and sweeps once.

import type { PeakPicture } from "./at-peak";
import type { DeviceState } from "./device";

export interface SegmentBlock {
  address: number;
  size_bytes: number;
  category: string;
  name: string | null;
}

export interface SegmentView {
  address: number;
  size_bytes: number;
  stream: number;
  time_us: number | null;
  allocated_bytes: number;
  free_bytes: number;
  largest_free_bytes: number;
  n_blocks: number;
  /** Free ranges inside the segment (inactive blocks of a split segment). */
  n_free_ranges: number;
  blocks?: SegmentBlock[];
}

export interface SegmentMap {
  device: number;
  /** True when an unmap matched no mapped range: sizes are right in total, placement may not be. */
  approximate: boolean;
  reserved_bytes: number;
  allocated_bytes: number;
  /** reserved − allocated (words.ts: UNALLOCATED), every pool's together (a snapshot's private
   *  pools apart: unallocated.ts). */
  reserved_unallocated_bytes: number;
  largest_free_bytes: number;
  /** Free ranges inside segments that also hold live blocks (inactive split blocks). */
  n_inactive_splits: number;
  /** Their bytes (torch's inactive_split_bytes): free, but not returned by empty_cache(), which
   *  releases whole segments only. */
  inactive_split_bytes: number;
  /** Bytes of segments holding no live block: what empty_cache() would release now (for a
   *  private pool's segments, only once the pool is gone). */
  releasable_bytes: number;

  /** Live bytes in no known segment (segments created before the recording began). */
  unplaced_bytes: number;
  segments: SegmentView[];
}

interface Sweep {
  largest: number;
  splits: number;
  splitBytes: number;
  wholeFree: number;
  unplaced: number;
  segments: SegmentView[];
}

/** Blocks in address order, as a sweep reads them: the live ones, or those of a moment. */
interface Sorted {
  n: number;
  address(k: number): number;
  size(k: number): number;
  block(k: number): SegmentBlock;
}

function liveSorted(d: DeviceState): Sorted {
  const slots = d.blocks.slotsByAddress();
  const b = d.blocks;
  return { n: slots.length, address: (k) => b.address[slots[k]!]!, size: (k) => b.size[slots[k]!]!, block: (k) => blockOf(d, slots[k]!) };
}

function sweep(d: DeviceState, withSegments: boolean, withBlocks: boolean, blocks: Sorted = liveSorted(d), segAddrs = d.segments.addresses()): Sweep {
  let k = 0;
  let largest = 0;
  let splits = 0;
  let splitBytes = 0;
  let wholeFree = 0;
  let unplaced = 0;
  const segments: SegmentView[] = [];
  for (const sa of segAddrs) {
    const size = d.segments.size(sa)!;
    const end = sa + size;
    while (k < blocks.n && blocks.address(k) < sa) unplaced += blocks.size(k++);
    let cursor = sa;
    let segLargest = 0;
    let allocated = 0;
    let nBlocks = 0;
    let nFree = 0;
    const inside: SegmentBlock[] | undefined = withBlocks ? [] : undefined;
    while (k < blocks.n && blocks.address(k) < end) {
      const addr = blocks.address(k);
      const bytes = blocks.size(k);
      if (addr > cursor) {
        nFree++;
        if (addr - cursor > segLargest) segLargest = addr - cursor;
      }
      cursor = Math.max(cursor, addr + bytes);
      allocated += bytes;
      nBlocks++;
      if (inside) inside.push(blocks.block(k));
      k++;
    }
    if (end > cursor) {
      nFree++;
      if (end - cursor > segLargest) segLargest = end - cursor;
    }
    if (segLargest > largest) largest = segLargest;
    if (nBlocks > 0) {
      splits += nFree;
      splitBytes += size - allocated;
    } else wholeFree += size;
    if (withSegments)
      segments.push({
        address: sa,
        size_bytes: size,
        stream: d.segments.stream(sa),
        time_us: d.segments.time(sa),
        allocated_bytes: allocated,
        free_bytes: size - allocated,
        largest_free_bytes: segLargest,
        n_blocks: nBlocks,
        n_free_ranges: nFree,
        ...(inside ? { blocks: inside } : {}),
      });
  }
  while (k < blocks.n) unplaced += blocks.size(k++);
  return { largest, splits, splitBytes, wholeFree, unplaced, segments };
}

function blockOf(d: DeviceState, s: number): SegmentBlock {
  const b = d.blocks;
  return {
    address: b.address[s]!,
    size_bytes: b.size[s]!,
    category: d.categoryOf(s),
    name: b.names[s] ?? null,
  };
}

/** The largest free range inside any segment (what a request can get without a new cudaMalloc). */
export function largestFreeBlock(d: DeviceState): number {
  return cachedSweep(d, false, false).largest;
}

// The last sweep per device and kind, reused while the device has not changed (views ask every
// frame; a sweep sorts every live block).
const memo = new WeakMap<DeviceState, Map<string, { version: number; s: Sweep }>>();

function cachedSweep(d: DeviceState, withSegments: boolean, withBlocks: boolean): Sweep {
  let m = memo.get(d);
  if (!m) memo.set(d, (m = new Map()));
  const key = `${withSegments}:${withBlocks}`;
  const hit = m.get(key);
  if (hit && hit.version === d.version) return hit.s;
  const s = sweep(d, withSegments, withBlocks);
  m.set(key, { version: d.version, s });
  return s;
}

/** The segment map (its arrays are shared with the next call while nothing changes: read-only). */
export function segmentMap(d: DeviceState, opts: { withBlocks?: boolean } = {}): SegmentMap {
  return mapOf(d, cachedSweep(d, true, opts.withBlocks ?? false), d.reserved, d.allocated);
}

/** A sweep as the map a view reads, with reserved and allocated at its moment. */
function mapOf(d: DeviceState, s: Sweep, reserved: number, allocated: number): SegmentMap {
  return {
    device: d.device,
    approximate: d.segments.approximate,
    reserved_bytes: reserved,
    allocated_bytes: allocated,
    reserved_unallocated_bytes: reserved - allocated,
    largest_free_bytes: s.largest,
    n_inactive_splits: s.splits,
    inactive_split_bytes: s.splitBytes,
    releasable_bytes: s.wholeFree,
    unplaced_bytes: s.unplaced,
    segments: s.segments,
  };
}

/** The segment map at a moment of the past (a step's peak or end, at-peak.ts): the blocks alive
 *  then in the segments that existed then (allocated by its time). Segments released since are
 *  gone from the model: their bytes are `released_since_bytes` (reserved then, less the segments
 *  shown), said, never drawn. */
export function segmentMapAt(
  d: DeviceState,
  pic: PeakPicture,
  describe: (row: number) => Pick<SegmentBlock, "category" | "name">,
  opts: { withBlocks?: boolean } = {},
): SegmentMap & { released_since_bytes: number } {
  const b = pic.blocks;
  const order: number[] = [];
  for (let i = 0; i < b.n; i++) order.push(i);
  order.sort((x, y) => b.address[x]! - b.address[y]!);
  const sorted: Sorted = {
    n: order.length,
    address: (k) => b.address[order[k]!]!,
    size: (k) => b.size[order[k]!]!,
    block: (k) => ({ address: b.address[order[k]!]!, size_bytes: b.size[order[k]!]!, ...describe(order[k]!) }),
  };
  const then = d.segments.addresses().filter((a) => (d.segments.time(a) ?? -Infinity) <= pic.time_us);
  const s = sweep(d, true, opts.withBlocks ?? false, sorted, then);
  const shown = s.segments.reduce((sum, x) => sum + x.size_bytes, 0);
  return { ...mapOf(d, s, pic.reserved_bytes, pic.peak_bytes), released_since_bytes: Math.max(0, pic.reserved_bytes - shown) };
}
