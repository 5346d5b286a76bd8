// The segment map of a device: the caching allocator's segments (cudaMalloc'd or mapped ranges)
// with the live blocks inside them and the free ranges between them. A query, not per event:
// it sorts segments and blocks by address and sweeps once.

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

function sweep(d: DeviceState, withSegments: boolean, withBlocks: boolean): Sweep {
  const segAddrs = d.segments.addresses();
  const slots = d.blocks.slotsByAddress();
  const b = d.blocks;
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
    while (k < slots.length && b.address[slots[k]!]! < sa) unplaced += b.size[slots[k++]!]!;
    let cursor = sa;
    let segLargest = 0;
    let allocated = 0;
    let nBlocks = 0;
    let nFree = 0;
    const blocks: SegmentBlock[] | undefined = withBlocks ? [] : undefined;
    while (k < slots.length && b.address[slots[k]!]! < end) {
      const s = slots[k++]!;
      const addr = b.address[s]!;
      if (addr > cursor) {
        nFree++;
        if (addr - cursor > segLargest) segLargest = addr - cursor;
      }
      cursor = Math.max(cursor, addr + b.size[s]!);
      allocated += b.size[s]!;
      nBlocks++;
      if (blocks) blocks.push(blockOf(d, s));
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
        ...(blocks ? { blocks } : {}),
      });
  }
  while (k < slots.length) unplaced += b.size[slots[k++]!]!;
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
  const s = cachedSweep(d, true, opts.withBlocks ?? false);
  return {
    device: d.device,
    approximate: d.segments.approximate,
    reserved_bytes: d.reserved,
    allocated_bytes: d.allocated,
    reserved_unallocated_bytes: d.reserved - d.allocated,
    largest_free_bytes: s.largest,
    n_inactive_splits: s.splits,
    inactive_split_bytes: s.splitBytes,
    releasable_bytes: s.wholeFree,
    unplaced_bytes: s.unplaced,
    segments: s.segments,
  };
}
