// Private pools: CUDA graphs (torch.compile mode="reduce-overhead", torch.cuda.graph) and
// torch.cuda.MemPool allocate from pools of their own, apart from the default pool. Their memory
// counts in torch's reserved and allocated bytes like any other, but what a private pool holds
// unallocated is the graph's (or the pool owner's) working memory: no other request can use it and
// empty_cache() does not release it while the pool lives. So it is shown as pools with their own
// bytes, never as the default pool's reserved but unallocated memory.
//
// Where the pools are known: a snapshot's segments carry `segment_pool_id` ((0, 0): the default
// pool), and so do the segments of a resync. A ring's segment records carry it in `extra` where the
// hook read it from torch's TraceEntry (the manifest's `segment_pools`, GPUMEM_FEATURE_SEGMENT_POOLS);
// in rings recorded before, a live process's pools cannot be told apart, and the views say so.

import type { BlockTable } from "./blocks";
import { partitionPoint } from "./partition";
import type { SegmentTable } from "./segment-table";

/** A snapshot's `segment_pool_id`: a pair of non-negative integers, (0, 0) the default pool. */
export type PoolId = readonly [number, number];

/** A private pool of one device, as the snapshot's segments hold it at its end. */
export interface PrivatePool {
  pool_id: PoolId;
  segments: number;
  reserved_bytes: number;
  allocated_bytes: number;
}

export const isDefaultPool = (id: PoolId): boolean => id[0] === 0 && id[1] === 0;

/** A segment's `segment_pool_id`: (0, 0) where it has none (torch before 2.1 wrote none); null
 *  where it is not a pair of non-negative integers (the caller says so in its own error). */
export function poolIdOf(v: unknown): PoolId | null {
  if (v === undefined || v === null) return [0, 0];
  if (!Array.isArray(v) || v.length !== 2 || !v.every((x) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0)) return null;
  return [v[0] as number, v[1] as number];
}

/** A segment as far as its pool's figures go (a snapshot's, src/profiler/resync.ts). */
interface PooledSegment {
  address?: number;
  total_size: number;
  segment_pool_id?: unknown;
  blocks?: ReadonlyArray<{ size: number; state: string }>;
}

/** The private pools of one device's segments, in pool id order; a malformed id is a TypeError
 *  that names the segment by its address. */
export function privatePoolsOf(segments: ReadonlyArray<PooledSegment>): PrivatePool[] {
  const pools = new Map<string, PrivatePool>();
  segments.forEach((seg) => {
    const id = poolIdOf(seg.segment_pool_id);
    if (id === null)
      throw new TypeError(`the segment at 0x${(seg.address ?? 0).toString(16)}: segment_pool_id must be a pair of non-negative integers, got ${String(JSON.stringify(seg.segment_pool_id)).slice(0, 60)}`);
    if (isDefaultPool(id)) return;
    const key = id.join(",");
    const p = pools.get(key) ?? pools.set(key, { pool_id: id, segments: 0, reserved_bytes: 0, allocated_bytes: 0 }).get(key)!;
    p.segments++;
    p.reserved_bytes += seg.total_size;
    for (const b of seg.blocks ?? []) if (b.state === "active_allocated") p.allocated_bytes += b.size;
  });
  return [...pools.values()].sort((a, b) => a.pool_id[0] - b.pool_id[0] || a.pool_id[1] - b.pool_id[1]);
}

/** The pools' reserved and allocated bytes together (what the default pool's figures leave out). */
export function poolTotals(pools: readonly PrivatePool[]): { reserved_bytes: number; allocated_bytes: number } {
  let reserved = 0;
  let allocated = 0;
  for (const p of pools) {
    reserved += p.reserved_bytes;
    allocated += p.allocated_bytes;
  }
  return { reserved_bytes: reserved, allocated_bytes: allocated };
}

/** A pool id as one number, as the ring's records carry it: first × 2^32 + second (0: the default
 *  pool). Exact for the ids torch hands out (small counters). */
export const poolKey = (id: PoolId): number => id[0] * 2 ** 32 + id[1];
export const poolIdOfKey = (key: number): PoolId => [Math.floor(key / 2 ** 32), key % 2 ** 32];

/** A segment's `segment_pool_id` (a snapshot's, a seed's) as the records' key; 0 where it is none
 *  or malformed (the default pool). */
export const segmentPoolKey = (v: unknown): number => poolKey(poolIdOf(v) ?? [0, 0]);

/** The private pools of one device from its segment table (the pool each segment record carried)
 *  and its live blocks (each counted in the pool of the segment that holds it). */
export function privatePoolsOfSegments(segments: SegmentTable, blocks: BlockTable): PrivatePool[] {
  const starts = segments.addresses();
  const pools = new Map<number, PrivatePool>();
  for (const a of starts) {
    const key = segments.pool(a);
    if (key === 0) continue;
    const p = pools.get(key) ?? pools.set(key, { pool_id: poolIdOfKey(key), segments: 0, reserved_bytes: 0, allocated_bytes: 0 }).get(key)!;
    p.segments++;
    p.reserved_bytes += segments.size(a) ?? 0;
  }
  if (pools.size === 0) return [];
  for (const slot of blocks.bySlot.values()) {
    const address = blocks.address[slot]!;
    const start = starts[partitionPoint(0, starts.length, (i) => starts[i]! <= address) - 1];
    if (start === undefined || address >= start + (segments.size(start) ?? 0)) continue;
    const p = pools.get(segments.pool(start));
    if (p) p.allocated_bytes += blocks.size[slot]!;
  }
  return [...pools.values()].sort((a, b) => a.pool_id[0] - b.pool_id[0] || a.pool_id[1] - b.pool_id[1]);
}
