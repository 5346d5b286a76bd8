// Memory that existed before a snapshot's recording began. `_record_memory_history` starts in a
// running process (after a first step, after cuBLAS made its workspaces), and its trace is a ring
// of the last `max_entries` events: blocks and segments from before its first entry show only as
// a free of an address the trace never allocated, or in the final `segments` with no alloc in the
// trace. memory_viz reconstructs its starting state the same way. Here the trace's block sizes
// are also made the allocator's (the trace records requests; a block may be larger): a block alive
// at the end has its size in the segments, a small-pool block is its request rounded, and a
// large-pool block's size comes from its segment's layout, followed through the trace
// (block-sizes.ts, large-pool.ts); where that layout is unknown the size is counted as inferred.
// Pure: columns, segments and allocator settings in, a starting state and per-entry block sizes out.

import { ACTION } from "../ffi/events";
import { blockSize } from "../profiler/totals";
import { AddressMap } from "../profiler/address-map";
import { SMALL_BUFFER, SMALL_SIZE, roundSize, rulesOf, type AllocatorRules } from "../profiler/block-sizes";
import { LargePoolLayout, type SeedBlock } from "../profiler/large-pool";
import { FrameHints, HINT_NO_FRAMES, HINT_NONE } from "./frames";
import type { TraceColumns } from "./trace-columns";

export interface BlockBefore {
  address: number;
  size: number;
  /** Freed before the recording but not yet given back (its stream still used it): active, not allocated. */
  pending_free: boolean;
  /** Phase hint from its frames in the final segments (frames.ts); none where it has none or was freed during the trace. */
  hint: number;
  stream: number;
}

export interface SegmentBefore {
  address: number;
  size: number;
  stream: number;
  /** An expandable segment's pages (segment_map), not a cudaMalloc'd segment. */
  mapped: boolean;
}

/** How the sizes of a device's blocks (the trace's allocs and the blocks from before) are known. */
export interface BlockSizes {
  blocks: number;
  /** Large-pool blocks in a stretch of a segment whose layout neither the trace nor the final
   *  segments show: counted at the request rounded, which may be short by up to 1 MiB each. */
  inferred: number;
  /** Allocs the layout sized with certainty that the final segments size otherwise (0 unless the
   *  allocator's rules changed): those take the segments' size. */
  disagreements: number;
}

export interface BeforeRecording {
  device: number;
  blocks: BlockBefore[];
  segments: SegmentBefore[];
  allocated_bytes: number;
  active_bytes: number;
  reserved_bytes: number;
  /** Not of the time before: the whole trace's block sizes on this device, how known. */
  block_sizes: BlockSizes;
}

/** A segment of the snapshot's `segments` list as far as this needs it. */
interface FinalSegment {
  device?: unknown;
  address?: unknown;
  total_size?: unknown;
  stream?: unknown;
  is_expandable?: unknown;
  blocks?: unknown;
}

const n = (v: unknown): number => (typeof v === "number" ? v : 0);

/**
 * The state each device started from. And in place, for every alloc and free entry of the trace,
 * `size` becomes the block size to account: the segments' size for blocks alive at the end, the
 * size the allocator's layout gives otherwise (the request rounded where it gives nothing more),
 * the same size for a block's alloc and its frees. (In place: a trace of millions of entries needs
 * no second column for it.) `settings`: the snapshot's `allocator_settings`, where it has them.
 */
export function beforeRecording(trace: TraceColumns, segments: unknown, settings?: unknown): BeforeRecording[] {
  const sizes = trace.size;
  const finals = (Array.isArray(segments) ? segments : []) as FinalSegment[];
  const devices = new Set<number>(trace.devices());
  for (const s of finals) if (s && typeof s === "object") devices.add(n(s.device));
  const hints = new FrameHints();
  const before: BeforeRecording[] = [];
  const expandable = finals.some((s) => s && typeof s === "object" && s.is_expandable === true);
  const rules = rulesOf(settings, expandable);
  for (const device of [...devices].sort((a, b) => a - b)) {
    before.push(oneDevice(trace, finals.filter((s) => s && typeof s === "object" && n(s.device) === device), device, sizes, hints, rules));
  }
  return before;
}

function oneDevice(t: TraceColumns, finals: FinalSegment[], device: number, sizes: Float64Array, hints: FrameHints, rules: AllocatorRules): BeforeRecording {
  const out: BeforeRecording = { device, blocks: [], segments: [], allocated_bytes: 0, active_bytes: 0, reserved_bytes: 0, block_sizes: { blocks: 0, inferred: 0, disagreements: 0 } };
  // Typed-array hash tables: a trace of millions of entries churns them with no garbage.
  const live = new AddressMap(1024); // address → its alloc entry
  const pending = new AddressMap(1024); // address → its alloc entry (−1: from before), free requested
  const pendingFree = new AddressMap(1024); // address → its free_requested entry
  const segs = new Set<number>();
  // The entries the large pool's layout needs (its allocs and frees, the segments), in order: a
  // second pass reads only these, once the final segments have said what they know.
  const layoutEntries = new EntryList();
  /** Blocks from before: whether their size is proven (the final segments state it, or the pool rounds exactly). */
  const proven: boolean[] = [];
  let allocs = 0;
  let mappedNet = 0;
  let mapped = false; // expandable segments' pages: every block is cut to its request rounded
  const { action, address, size, stream } = t;
  // the allocator's round_size; with no power-of-two divisions, 512 bytes, as the model rounds
  const round = rules.powerTwo ? (r: number) => roundSize(r, rules) : blockSize;
  for (let i = 0; i < t.count; i++) {
    if (t.device[i] !== device) continue;
    const a = action[i]!;
    const addr = address[i]!;
    switch (a) {
      case ACTION.alloc:
        live.set(addr, i);
        pending.remove(addr);
        sizes[i] = round(size[i]!);
        if (sizes[i]! > SMALL_SIZE) layoutEntries.push(i);
        allocs++;
        break;
      case ACTION.free_requested: {
        const k = live.get(addr);
        if (k !== undefined) {
          live.remove(addr);
          sizes[i] = sizes[k]!;
          pending.set(addr, k);
        } else {
          sizes[i] = round(size[i]!);
          out.blocks.push({ address: addr, size: sizes[i]!, pending_free: false, hint: HINT_NONE, stream: stream[i]! });
          proven.push(sizes[i]! <= SMALL_SIZE);
          pending.set(addr, -1);
        }
        pendingFree.set(addr, i);
        if (sizes[i]! > SMALL_SIZE) layoutEntries.push(i);
        break;
      }
      case ACTION.free_completed: {
        const k = pending.get(addr);
        const r = pendingFree.get(addr);
        if (k !== undefined) sizes[i] = r !== undefined ? sizes[r]! : round(size[i]!);
        else {
          // Its free was requested before the recording: it was active, not allocated, at the start.
          sizes[i] = round(size[i]!);
          out.blocks.push({ address: addr, size: sizes[i]!, pending_free: true, hint: HINT_NONE, stream: stream[i]! });
          proven.push(sizes[i]! <= SMALL_SIZE);
        }
        pending.remove(addr);
        pendingFree.remove(addr);
        if (sizes[i]! > SMALL_SIZE) layoutEntries.push(i);
        break;
      }
      case ACTION.segment_alloc:
        segs.add(addr);
        if (size[i] !== SMALL_BUFFER) layoutEntries.push(i); // the small pool's segments are 2 MiB each
        break;
      case ACTION.segment_free:
        if (!segs.delete(addr)) out.segments.push({ address: addr, size: size[i]!, stream: stream[i]!, mapped: false });
        if (size[i] !== SMALL_BUFFER) layoutEntries.push(i);
        break;
      case ACTION.segment_map:
        mappedNet += size[i]!;
        mapped = true;
        break;
      case ACTION.segment_unmap:
        mappedNet -= size[i]!;
        mapped = true;
        break;
    }
  }
  // The end: what the segments hold that the trace never made, and the size of every block alive.
  const exact = new Map<number, number>(); // alloc entry → its block's size in the final segments
  const rounded = new Map<number, number>(); // alloc entry → its request rounded (its size till now)
  const sized = (k: number, bsize: number) => {
    rounded.set(k, sizes[k]!);
    exact.set(k, bsize);
    sizes[k] = bsize;
  };
  let expandable = 0;
  let expandableAt: FinalSegment | null = null;
  for (const s of finals) {
    const at = n(s.address);
    if (s.is_expandable === true) {
      expandable += n(s.total_size);
      expandableAt ??= s;
    } else if (!segs.has(at)) out.segments.push({ address: at, size: n(s.total_size), stream: n(s.stream), mapped: false });
    for (const b of Array.isArray(s.blocks) ? s.blocks : []) {
      if (!b || typeof b !== "object") continue;
      const { address: ba, size: bs, state, frames } = b as { address?: unknown; size?: unknown; state?: unknown; frames?: unknown };
      const addr = n(ba);
      const bsize = n(bs);
      if (state === "active_allocated") {
        const k = live.get(addr);
        if (k !== undefined) sized(k, bsize);
        else if (pending.get(addr) === undefined) {
          out.blocks.push({ address: addr, size: bsize, pending_free: false, hint: hintOf(hints, frames), stream: n(s.stream) });
          proven.push(true);
        }
      } else if (state === "active_pending_free") {
        const k = pending.get(addr);
        if (k !== undefined) {
          if (k >= 0) sized(k, bsize);
          const r = pendingFree.get(addr);
          if (r !== undefined) sizes[r] = bsize;
        } else if (live.get(addr) === undefined) {
          out.blocks.push({ address: addr, size: bsize, pending_free: true, hint: hintOf(hints, frames), stream: n(s.stream) });
          proven.push(true);
        }
      }
    }
  }
  out.block_sizes.blocks = allocs + out.blocks.length;
  if (!rules.expandable && !mapped && layoutEntries.count > 0) largePool(t, sizes, rules, layoutEntries.done(), out, proven, exact, rounded);
  // Expandable segments grow and shrink by mapped pages: what is mapped at the end and was not
  // mapped by the trace was mapped before it.
  if (expandableAt && expandable > mappedNet) out.segments.push({ address: n(expandableAt.address), size: expandable - mappedNet, stream: n(expandableAt.stream), mapped: true });
  for (const b of out.blocks) {
    out.active_bytes += b.size;
    if (!b.pending_free) out.allocated_bytes += b.size;
  }
  for (const s of out.segments) out.reserved_bytes += s.size;
  return out;
}

/**
 * The second pass: the large pool's segments followed through the layout entries, from the
 * segments and blocks that existed before. Each large alloc gets the size the allocator's split
 * rule gives, its frees the same; a block alive at the end keeps the final segments' size.
 */
function largePool(t: TraceColumns, sizes: Float64Array, rules: AllocatorRules, entries: Uint32Array, out: BeforeRecording, proven: boolean[], exact: Map<number, number>, rounded: Map<number, number>): void {
  const layout = new LargePoolLayout(rules);
  const olds = out.blocks.map((b, k): SeedBlock => ({ address: b.address, size: b.size, known: proven[k]! })).sort((a, b) => a.address - b.address);
  for (const s of out.segments) {
    if (s.mapped || s.size === SMALL_BUFFER) continue; // the small pool's segments are 2 MiB each
    let lo = 0;
    let hi = olds.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (olds[mid]!.address < s.address) lo = mid + 1;
      else hi = mid;
    }
    let end = lo;
    while (end < olds.length && olds[end]!.address < s.address + s.size) end++;
    layout.seed(s.address, s.size, olds.slice(lo, end));
  }
  const { action, address, size } = t;
  for (const i of entries) {
    const addr = address[i]!;
    switch (action[i]) {
      case ACTION.segment_alloc:
        layout.segmentAlloc(addr, size[i]!);
        break;
      case ACTION.segment_free:
        layout.segmentFree(addr, size[i]!);
        break;
      case ACTION.alloc: {
        const e = exact.size > 0 ? exact.get(i) : undefined;
        sizes[i] = layout.alloc(addr, e === undefined ? sizes[i]! : rounded.get(i)!, e ?? NaN, i);
        break;
      }
      case ACTION.free_requested: {
        const s = layout.freeRequested(addr, i);
        if (s !== undefined) sizes[i] = s;
        break;
      }
      case ACTION.free_completed: {
        const s = layout.freeCompleted(addr);
        if (s !== undefined) sizes[i] = s;
        break;
      }
    }
  }
  // blocks found to reach further than counted (a block handed out where their tail was thought to be)
  for (const r of layout.resized) {
    if (r.entry >= 0) sizes[r.entry] = r.size;
    if (r.freeEntry >= 0) sizes[r.freeEntry] = r.size;
    if (r.entry < 0) for (const b of out.blocks) if (b.address === r.address) b.size = r.size;
  }
  out.block_sizes.inferred = layout.inferred;
  out.block_sizes.disagreements = layout.disagreements;
}

/** Entry indices, appended in order into a typed array that doubles as needed. */
class EntryList {
  private a = new Uint32Array(1024);
  count = 0;

  push(i: number): void {
    if (this.count === this.a.length) {
      const b = new Uint32Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.count++] = i;
  }

  done(): Uint32Array {
    return this.a.subarray(0, this.count);
  }
}

/** A block's frames in the final segments. A block from before the recording has none (nothing
 *  recorded them): that says nothing of its phase. */
function hintOf(hints: FrameHints, frames: unknown): number {
  const h = hints.of(frames);
  return h === HINT_NO_FRAMES ? HINT_NONE : h;
}
