// What a PyTorch memory snapshot says, as plain numbers (pure: the parsed snapshot in, a summary out).
//
// Summary shape (what `gpumem-tui view FILE --json` prints):
//   devices[]: { device, segments, blocks, active_blocks, inactive_blocks, reserved_bytes,
//                allocated_bytes, active_bytes, inactive_bytes, largest_free_block_bytes,
//                fragmentation, expandable_segments, reserved_unallocated_bytes,
//                streams: [{ stream, segments, reserved_bytes, allocated_bytes, active_bytes,
//                            active_blocks, inactive_blocks }],
//                pools: [{ pool, segments, reserved_bytes, allocated_bytes, free_bytes,
//                          largest_free_block_bytes }],
//                private_pools: [{ pool_id: [a, b], segments, reserved_bytes, allocated_bytes }] }
//                (active blocks: allocated or freed but still in use by a stream; a pool is the
//                segment type, large or small, and the private pool id where it has one; private
//                pools are those of CUDA graphs and torch.cuda.MemPool (segment_pool_id other than
//                (0, 0)). Their memory counts in reserved_bytes and allocated_bytes, as in torch's
//                own; reserved_unallocated_bytes (words.ts: UNALLOCATED), largest_free_block_bytes
//                and fragmentation are the default pool's alone: what a private pool holds
//                unallocated is its graph's working memory, no other request's. fragmentation =
//                1 - largest free block / all free bytes of the default pool: 0 when the free bytes
//                are one block or none, near 1 when they are many small holes)
//   segments[]: { device, address, stream, segment_type, total_bytes, allocated_bytes, active_bytes,
//                 blocks: [{ address, size_bytes, requested_bytes, state }] }  (address order)
//   top_allocations[]: { device, address, size_bytes, requested_bytes, frames: ["file:line name"]
//                        (innermost first, at most 32; C/C++ frames left out where there are
//                        Python ones), frames_total (all of them), user_frame: "file:line name"
//                        (the first frame outside library code: profiler/user-frame.ts) or null,
//                        user_frame_index (its place in `frames`) or null }
//   by_user_frame[]: { device, user_frame, blocks, bytes } (allocated blocks summed by user frame,
//                    the most bytes first, at most 50 a device; user_frame null: none known)
//   trace: { entries, by_action: {alloc: n, …}, first_time_us, last_time_us }, null without history
//   annotations: { count, names: [distinct record_function names],
//                  ranges: [{ device, name, start_us, end_us }] } (START/END paired per device and
//                  name, innermost first; end_us null when the snapshot was taken inside the range)
//   oom: [{ device, requested_bytes, free_bytes, time_us }]
import { ACTION, ACTION_NAMES } from "../ffi/events";
import { isDefaultPool, poolIdOf as parsePoolId, privatePoolsOf, type PoolId, type PrivatePool } from "../profiler/pools";
import { SnapshotError, type PickleValue } from "./pickle";
import type { ParsedSnapshot } from "./read";
import { allocatedAt, byUserFrameJson, snapshotStacks, type AllocatedAt } from "./block-stacks";
import { DEFAULT_USER_FRAME_RULE, type BlockStacks, type UserFrameRule } from "../profiler/user-frame";

type Obj = { [k: string]: PickleValue };

const isObj = (v: PickleValue | undefined): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
const list = (v: PickleValue | undefined, what: string): PickleValue[] => {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new SnapshotError(`${what} is not a list`);
  return v;
};
const num = (v: PickleValue | undefined): number => (typeof v === "number" ? v : 0);

export interface StreamSummary {
  stream: number;
  segments: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  active_blocks: number;
  inactive_blocks: number;
}

export interface PoolSummary {
  pool: string;
  segments: number;
  reserved_bytes: number;
  allocated_bytes: number;
  free_bytes: number;
  largest_free_block_bytes: number;
}

export interface DeviceSummary {
  device: number;
  segments: number;
  blocks: number;
  active_blocks: number;
  inactive_blocks: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  inactive_bytes: number;
  largest_free_block_bytes: number;
  fragmentation: number;
  expandable_segments: number;
  /** The default pool's reserved − allocated bytes (private pools' are theirs: `private_pools`). */
  reserved_unallocated_bytes: number;
  streams: StreamSummary[];
  pools: PoolSummary[];
  /** CUDA graphs' and torch.cuda.MemPool's pools, with their own bytes; empty where none. */
  private_pools: PrivatePool[];
}

export interface SegmentSummary {
  device: number;
  address: number;
  stream: number;
  segment_type: string | null;
  total_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  blocks: { address: number; size_bytes: number; requested_bytes: number | null; state: string }[];
}

export interface AnnotationRange {
  device: number;
  name: string;
  start_us: number;
  end_us: number | null;
}

export interface SnapshotSummary {
  devices: DeviceSummary[];
  segments: SegmentSummary[];
  top_allocations: ({ device: number; address: number; size_bytes: number; requested_bytes: number | null } & AllocatedAt)[];
  by_user_frame: ReturnType<typeof byUserFrameJson>;
  trace: { entries: number; by_action: Record<string, number>; first_time_us: number | null; last_time_us: number | null } | null;
  annotations: { count: number; names: string[]; ranges: AnnotationRange[] };
  oom: { device: number; requested_bytes: number; free_bytes: number; time_us: number | null }[];
}

/** A segment's `segment_pool_id`: (0, 0), the default pool, where the snapshot has none (torch
 *  before 2.1 wrote none); an error where it is not a pair of non-negative integers. */
function poolIdOf(seg: Obj, i: number): PoolId {
  const id = parsePoolId(seg.segment_pool_id);
  if (id === null) throw new SnapshotError(`segments[${i}].segment_pool_id is not a pair of non-negative integers`);
  return id;
}

/** A segment's pool in words: its type, and its private pool where it is not the default (0, 0). */
function poolName(seg: Obj, id: PoolId): string {
  const type = typeof seg.segment_type === "string" ? seg.segment_type : seg.is_expandable === true ? "expandable" : "unknown";
  return isDefaultPool(id) ? type : `${type} (pool ${id.join(", ")})`;
}

/**
 * The private pools of each device (CUDA graphs, torch.cuda.MemPool: segment_pool_id other than
 * (0, 0)) with their reserved and allocated bytes, from the snapshot's segments: what the model of
 * a snapshot is told (the trace's entries name no pool), and what the summary shows apart.
 */
export function privatePools(root: { [key: string]: PickleValue }): Map<number, PrivatePool[]> {
  const byDevice = new Map<number, { total_size: number; segment_pool_id: PoolId; blocks: { size: number; state: string }[] }[]>();
  for (const [i, seg] of list(root.segments, "segments").entries()) {
    if (!isObj(seg)) throw new SnapshotError(`segments[${i}] is not a dict`);
    const id = poolIdOf(seg, i);
    const device = num(seg.device);
    const segs = byDevice.get(device) ?? byDevice.set(device, []).get(device)!;
    if (isDefaultPool(id)) continue; // every device is named, with or without private pools
    const blocks = list(seg.blocks, `segments[${i}].blocks`).filter(isObj).map((b) => ({ size: num(b.size), state: String(b.state) }));
    segs.push({ total_size: num(seg.total_size), segment_pool_id: id, blocks });
  }
  return new Map([...byDevice].map(([device, segs]) => [device, privatePoolsOf(segs)]));
}

/** `stacks`: where the blocks were allocated, where the caller has them already (view.ts's model). */
export function summarize(parsed: ParsedSnapshot, top = 10, rule: UserFrameRule = DEFAULT_USER_FRAME_RULE, stacks?: BlockStacks): SnapshotSummary {
  const snapshot = parsed.root;
  if (!isObj(snapshot) || !Array.isArray(snapshot.segments)) {
    throw new SnapshotError("not a PyTorch memory snapshot: no `segments` list (a pickle of something else)");
  }
  // Where each block was allocated (block-stacks.ts): one stack's words once, however many blocks.
  stacks ??= snapshotStacks(snapshot, parsed.trace.stacks, rule);
  const at = new Map<number, AllocatedAt>();
  const byDevice = new Map<number, DeviceSummary>();
  const streams = new Map<string, StreamSummary>();
  const pools = new Map<string, PoolSummary>();
  const live: SnapshotSummary["top_allocations"] = [];
  const segments: SegmentSummary[] = [];
  // The default pool's own: its reserved, allocated and free blocks (see the shape above).
  const dflt = new Map<number, { reserved: number; allocated: number; inactive: number }>();
  for (const [i, seg] of snapshot.segments.entries()) {
    if (!isObj(seg)) throw new SnapshotError(`segments[${i}] is not a dict`);
    const device = num(seg.device);
    let d = byDevice.get(device);
    if (!d) byDevice.set(device, (d = { device, segments: 0, blocks: 0, active_blocks: 0, inactive_blocks: 0, reserved_bytes: 0, allocated_bytes: 0, active_bytes: 0, inactive_bytes: 0, largest_free_block_bytes: 0, fragmentation: 0, expandable_segments: 0, reserved_unallocated_bytes: 0, streams: [], pools: [], private_pools: [] }));
    const stream = num(seg.stream);
    const sk = `${device}/${stream}`;
    let st = streams.get(sk);
    if (!st) streams.set(sk, (st = { stream, segments: 0, reserved_bytes: 0, allocated_bytes: 0, active_bytes: 0, active_blocks: 0, inactive_blocks: 0 }));
    d.streams.push(st);
    const poolId = poolIdOf(seg, i);
    const inDefault = isDefaultPool(poolId);
    const own = dflt.get(device) ?? dflt.set(device, { reserved: 0, allocated: 0, inactive: 0 }).get(device)!;
    if (inDefault) own.reserved += num(seg.total_size);
    const pk = `${device}/${poolName(seg, poolId)}`;
    let pool = pools.get(pk);
    if (!pool) pools.set(pk, (pool = { pool: poolName(seg, poolId), segments: 0, reserved_bytes: 0, allocated_bytes: 0, free_bytes: 0, largest_free_block_bytes: 0 }));
    d.pools.push(pool);
    d.segments++;
    st.segments++;
    pool.segments++;
    d.reserved_bytes += num(seg.total_size);
    st.reserved_bytes += num(seg.total_size);
    pool.reserved_bytes += num(seg.total_size);
    if (seg.is_expandable === true) d.expandable_segments++;
    const out: SegmentSummary = { device, address: num(seg.address), stream: num(seg.stream), segment_type: typeof seg.segment_type === "string" ? seg.segment_type : null, total_bytes: num(seg.total_size), allocated_bytes: 0, active_bytes: 0, blocks: [] };
    segments.push(out);
    for (const b of list(seg.blocks, `segments[${i}].blocks`)) {
      if (!isObj(b)) continue;
      d.blocks++;
      const size = num(b.size);
      const state = typeof b.state === "string" ? b.state : "inactive";
      out.blocks.push({ address: num(b.address), size_bytes: size, requested_bytes: typeof b.requested_size === "number" ? b.requested_size : null, state });
      if (state !== "inactive") out.active_bytes += size;
      if (state === "active_allocated") out.allocated_bytes += size;
      if (b.state === "active_allocated" || b.state === "active_pending_free") {
        d.active_blocks++;
        st.active_blocks++;
        st.active_bytes += size;
      } else {
        d.inactive_blocks++;
        st.inactive_blocks++;
        pool.free_bytes += size;
        pool.largest_free_block_bytes = Math.max(pool.largest_free_block_bytes, size);
      }
      if (b.state === "active_allocated") {
        st.allocated_bytes += size;
        pool.allocated_bytes += size;
        if (inDefault) own.allocated += size;
        d.allocated_bytes += size;
        d.active_bytes += size;
        live.push({ device, address: num(b.address), size_bytes: size, requested_bytes: typeof b.requested_size === "number" ? b.requested_size : null, ...allocatedAt(stacks, stacks.stackOf(device, num(b.address)), at) });
      } else if (b.state === "active_pending_free") {
        d.active_bytes += size;
      } else {
        d.inactive_bytes += size;
        if (inDefault) {
          own.inactive += size;
          d.largest_free_block_bytes = Math.max(d.largest_free_block_bytes, size);
        }
      }
    }
  }
  live.sort((a, b) => b.size_bytes - a.size_bytes);
  segments.sort((a, b) => a.device - b.device || a.address - b.address);
  const priv = privatePools(snapshot);
  for (const d of byDevice.values()) {
    const own = dflt.get(d.device)!;
    d.fragmentation = own.inactive > 0 ? 1 - d.largest_free_block_bytes / own.inactive : 0;
    d.reserved_unallocated_bytes = own.reserved - own.allocated;
    d.private_pools = priv.get(d.device) ?? [];
  }

  // Each device's streams and pools once, in order.
  for (const d of byDevice.values()) {
    d.streams = [...new Set(d.streams)].sort((a, b) => a.stream - b.stream);
    d.pools = [...new Set(d.pools)].sort((a, b) => a.pool.localeCompare(b.pool));
  }

  let trace: SnapshotSummary["trace"] = null;
  const oom: SnapshotSummary["oom"] = [];
  const t = parsed.trace;
  if (t.count > 0 || (Array.isArray(snapshot.device_traces) && snapshot.device_traces.length > 0)) {
    const counts = new Float64Array(32);
    let first = Infinity;
    let last = -Infinity;
    for (let i = 0; i < t.count; i++) {
      counts[t.action[i]!]!++;
      const time = t.time_us[i]!;
      if (time < first) first = time;
      if (time > last) last = time;
      if (t.action[i] === ACTION.oom) oom.push({ device: t.device[i]!, requested_bytes: t.size[i]!, free_bytes: t.deviceFree.get(i) ?? 0, time_us: Number.isNaN(time) ? null : time });
    }
    const by: Record<string, number> = {};
    counts.forEach((c, a) => {
      if (c > 0) by[ACTION_NAMES[a]!] = c;
    });
    trace = { entries: t.count, by_action: by, first_time_us: Number.isFinite(first) ? first : null, last_time_us: Number.isFinite(last) ? last : null };
  }
  const anns = list(snapshot.external_annotations, "external_annotations").filter(isObj);
  return {
    devices: [...byDevice.values()].sort((a, b) => a.device - b.device),
    segments,
    top_allocations: live.slice(0, top),
    by_user_frame: byUserFrameJson(live),
    trace,
    annotations: { count: anns.length, names: [...new Set(anns.map((a) => String(a.name)))], ranges: annotationRanges(anns) },
    oom,
  };
}

/**
 * record_function START/END marks → ranges. Marks of one device and name nest (a function that
 * recurses, a block run twice in a loop), so an END closes the latest open START of that name.
 * An END without a START (the history's ring dropped it) is skipped; a START never closed stays
 * open (end_us null). Ranges come out in start order.
 */
export function annotationRanges(anns: Obj[]): AnnotationRange[] {
  const open = new Map<string, AnnotationRange[]>();
  const out: AnnotationRange[] = [];
  for (const a of anns) {
    const device = num(a.device);
    const name = String(a.name);
    const time = typeof a.time_us === "number" ? a.time_us : null;
    if (time === null) continue;
    const key = `${device}\u0000${name}`;
    if (a.stage === "START") {
      const r: AnnotationRange = { device, name, start_us: time, end_us: null };
      out.push(r);
      (open.get(key) ?? open.set(key, []).get(key)!).push(r);
    } else if (a.stage === "END") {
      const r = open.get(key)?.pop();
      if (r) r.end_us = time;
    }
  }
  return out.sort((a, b) => a.start_us - b.start_us);
}
