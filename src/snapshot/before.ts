// Memory that existed before a snapshot's recording began. `_record_memory_history` starts in a
// running process (after a first step, after cuBLAS made its workspaces), and its trace is a ring
// of the last `max_entries` events: blocks and segments from before its first entry show only as
// a free of an address the trace never allocated, or in the final `segments` with no alloc in the
// trace. memory_viz reconstructs its starting state the same way. Here the trace's block sizes
// are also made exact where the snapshot knows them: a block alive at the end has its size in the
// segments (the allocator may hand out a block larger than the request, which the trace records).
// Pure: columns and segments in, a starting state and per-entry block sizes out.

import { ACTION } from "../ffi/events";
import { AddressMap } from "../profiler/address-map";
import { blockSize } from "../profiler";
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

export interface BeforeRecording {
  device: number;
  blocks: BlockBefore[];
  segments: SegmentBefore[];
  allocated_bytes: number;
  active_bytes: number;
  reserved_bytes: number;
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
 * request rounded as the allocator rounds it otherwise, the same size for a block's alloc and its
 * frees. (In place: a trace of millions of entries needs no second column for it.)
 */
export function beforeRecording(trace: TraceColumns, segments: unknown): BeforeRecording[] {
  const sizes = trace.size;
  const finals = (Array.isArray(segments) ? segments : []) as FinalSegment[];
  const devices = new Set<number>(trace.devices());
  for (const s of finals) if (s && typeof s === "object") devices.add(n(s.device));
  const hints = new FrameHints();
  const before: BeforeRecording[] = [];
  for (const device of [...devices].sort((a, b) => a - b)) {
    before.push(oneDevice(trace, finals.filter((s) => s && typeof s === "object" && n(s.device) === device), device, sizes, hints));
  }
  return before;
}

function oneDevice(t: TraceColumns, finals: FinalSegment[], device: number, sizes: Float64Array, hints: FrameHints): BeforeRecording {
  const out: BeforeRecording = { device, blocks: [], segments: [], allocated_bytes: 0, active_bytes: 0, reserved_bytes: 0 };
  // Typed-array hash tables: a trace of millions of entries churns them with no garbage.
  const live = new AddressMap(1024); // address → its alloc entry
  const pending = new AddressMap(1024); // address → its alloc entry (−1: from before), free requested
  const pendingFree = new AddressMap(1024); // address → its free_requested entry
  const segs = new Set<number>();
  let mappedNet = 0;
  const { action, address, size, stream } = t;
  for (let i = 0; i < t.count; i++) {
    if (t.device[i] !== device) continue;
    const a = action[i]!;
    const addr = address[i]!;
    switch (a) {
      case ACTION.alloc:
        live.set(addr, i);
        pending.remove(addr);
        sizes[i] = blockSize(size[i]!);
        break;
      case ACTION.free_requested: {
        const k = live.get(addr);
        if (k !== undefined) {
          live.remove(addr);
          sizes[i] = sizes[k]!;
          pending.set(addr, k);
        } else {
          sizes[i] = blockSize(size[i]!);
          out.blocks.push({ address: addr, size: sizes[i]!, pending_free: false, hint: HINT_NONE, stream: stream[i]! });
          pending.set(addr, -1);
        }
        pendingFree.set(addr, i);
        break;
      }
      case ACTION.free_completed: {
        const k = pending.get(addr);
        const r = pendingFree.get(addr);
        if (k !== undefined) sizes[i] = r !== undefined ? sizes[r]! : blockSize(size[i]!);
        else {
          // Its free was requested before the recording: it was active, not allocated, at the start.
          sizes[i] = blockSize(size[i]!);
          out.blocks.push({ address: addr, size: sizes[i]!, pending_free: true, hint: HINT_NONE, stream: stream[i]! });
        }
        pending.remove(addr);
        pendingFree.remove(addr);
        break;
      }
      case ACTION.segment_alloc:
        segs.add(addr);
        break;
      case ACTION.segment_free:
        if (!segs.delete(addr)) out.segments.push({ address: addr, size: size[i]!, stream: stream[i]!, mapped: false });
        break;
      case ACTION.segment_map:
        mappedNet += size[i]!;
        break;
      case ACTION.segment_unmap:
        mappedNet -= size[i]!;
        break;
    }
  }
  // The end: what the segments hold that the trace never made.
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
        if (k !== undefined) sizes[k] = bsize;
        else if (pending.get(addr) === undefined) out.blocks.push({ address: addr, size: bsize, pending_free: false, hint: hintOf(hints, frames), stream: n(s.stream) });
      } else if (state === "active_pending_free") {
        const k = pending.get(addr);
        if (k !== undefined) {
          if (k >= 0) sizes[k] = bsize;
          const r = pendingFree.get(addr);
          if (r !== undefined) sizes[r] = bsize;
        } else if (live.get(addr) === undefined) out.blocks.push({ address: addr, size: bsize, pending_free: true, hint: hintOf(hints, frames), stream: n(s.stream) });
      }
    }
  }
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

/** A block's frames in the final segments. A block from before the recording has none (nothing
 *  recorded them): that says nothing of its phase. */
function hintOf(hints: FrameHints, frames: unknown): number {
  const h = hints.of(frames);
  return h === HINT_NO_FRAMES ? HINT_NONE : h;
}
