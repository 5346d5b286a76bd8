// A PyTorch memory snapshot written from what the monitor saw: the model's segments and live
// blocks, and its last records as `device_traces`, in the layout torch.cuda.memory._snapshot()
// gives, so pytorch.org/memory_viz and torch.cuda._memory_viz open it. For a process whose agent
// records no memory history, and for replays. Pure: model in, plain data out.
//
// Stack frames: where the model has a block's stack (a snapshot's, replayed), its frames as torch
// lists them; and after them, on every block and trace entry, one frame naming what we know (tensor
// name and category, step, phase, record_function range).
//
// memory_viz replays the trace backwards from the segments to draw any moment; a trace that does
// not add up to the segments (records lost, segments from before the agent attached) breaks it.
// checkTrace walks the same way and the trace starts after the last entry that would not add up.

import { ACTION, ACTION_NAMES, isMark, PHASE_NAMES } from "../ffi/events";
import { blockSize, segmentMap, type DeviceState, type ProfilerModel } from "../profiler";
import { Tuple } from "./pickle-write";

export interface TraceEntry {
  action: string;
  addr: number;
  size: number;
  stream: number;
  time_us: number;
  device_free?: number;
  frames: Frame[];
}

export interface Frame {
  name: string;
  filename: string;
  line: number;
}

export interface BlockOut {
  address: number;
  size: number;
  requested_size: number;
  state: "active_allocated" | "active_pending_free" | "inactive";
  frames: Frame[];
}

export interface SegmentOut {
  device: number;
  address: number;
  total_size: number;
  allocated_size: number;
  active_size: number;
  requested_size: number;
  stream: number;
  segment_type: "small" | "large";
  segment_pool_id: Tuple;
  is_expandable: boolean;
  frames: Frame[];
  blocks: BlockOut[];
}

export interface WrittenSnapshot {
  segments: SegmentOut[];
  device_traces: TraceEntry[][];
  external_annotations: Array<{ stage: "START" | "END"; name: string; device: number; time_us: number }>;
  /** Ours (memory_viz and torch ignore keys they do not know): how the file was made and its gaps. */
  gpumem: {
    writer: "gpumem-tui";
    pid: number | null;
    trace_entries: number;
    /** The monitor's records the trace was made from (its newest, where it kept fewer than it saw),
     *  and all it saw: a record is one trace entry or more (a free is free_requested and
     *  free_completed), marks none. */
    records: number;
    records_seen: number;
    /** Trace entries left out at the start because they would not add up to the segments. */
    trace_dropped: number;
    /** Live blocks in no segment the monitor saw (allocated before its records begin): placed in segments spanning what the records touch. */
    unplaced_blocks: number;
    notes: string[];
  };
}

const SMALL_SEGMENT = 2 * 1024 * 1024;
const SMALL_REQUEST = 1024 * 1024;
const FILE = "gpumem-tui";

function frame(name: string): Frame[] {
  return [{ name, filename: FILE, line: 0 }];
}

/** Stack `stack`'s own frames (innermost first, as torch lists them) before `ours`, the frame
 *  naming what the monitor knows: memory_viz shows the real stack, then our words. */
function withStack(m: ProfilerModel, stack: number, ours: Frame[]): Frame[] {
  if (!stack || !m.stacks) return ours;
  return [...m.stacks.frames(stack).map((f) => ({ name: f.name, filename: f.file, line: f.line })), ...ours];
}

/** "train.py:42: loss = model(x)" as a frame: file, line, and the code as the function's place. */
function lineFrame(name: string): Frame {
  const m = /^(.*?):(\d+): ?(.*)$/.exec(name);
  return m ? { filename: m[1]!, line: Number(m[2]), name: m[3]! || "?" } : { filename: FILE, line: 0, name };
}

function where(step: number, phase: number, range: string | null): string {
  return `step ${step} ${PHASE_NAMES[phase] ?? "other"}${range ? ` in ${range}` : ""}`;
}

/** The snapshot of a model; `model.keepTrace()` must have been on for it to have a trace. */
export function snapshotFromModel(m: ProfilerModel): WrittenSnapshot {
  const notes: string[] = [];
  const segments: SegmentOut[] = [];
  const maxDevice = m.devices.reduce((x, d) => Math.max(x, d.device), -1);
  const traces: TraceEntry[][] = Array.from({ length: maxDevice + 1 }, () => []);
  const annotations: WrittenSnapshot["external_annotations"] = [];
  const tail = m.tail;
  if (!tail) notes.push("the monitor kept no trace for this process: segments and blocks only");
  else if (tail.validFrom > 0 && tail.validFrom >= tail.total - tail.capacity)
    notes.push("records were lost (the ring lapped): the trace starts after the loss");
  // A trace that holds only the newest records is said in the sentence that counts them
  // (snapshot/write.ts, from gpumem.records), not twice.

  // Trace entries by device, from the tail in order; range marks become annotations.
  const firstDevice = maxDevice >= 0 ? Math.min(...m.devices.map((d) => d.device)) : 0;
  if (tail) {
    for (let k = tail.first; k < tail.total; k++) {
      const s = tail.slot(k);
      const a = tail.action[s]!;
      const time_us = tail.time_us[s]!;
      if (a === ACTION.range_enter || a === ACTION.range_exit) {
        annotations.push({ stage: a === ACTION.range_enter ? "START" : "END", name: m.rangeName(tail.range[s]!) ?? "range", device: firstDevice, time_us });
        continue;
      }
      const action = ACTION_NAMES[a];
      if (isMark(a) || action === undefined) continue; // marks, and codes no writer makes
      const dev = tail.device[s]!;
      if (dev < 0 || dev > maxDevice) continue;
      const size = tail.size[s]!;
      if (a === ACTION.free) {
        // The reader folded the pair (src/ffi/ring.ts); a snapshot's trace has both entries.
        const fields = { addr: tail.address[s]!, size, stream: tail.stream[s]! };
        traces[dev]!.push({ action: "free_requested", ...fields, time_us, frames: [] }, { action: "free_completed", ...fields, time_us: tail.extra[s]!, frames: [] });
        continue;
      }
      // Its stack: a snapshot's trace gives it; a ring's alloc carries it in `extra`, an OOM (the
      // request that failed) in its address (docs/protocol.md), where the manifest says stacks are on.
      const stack = tail.stack[s]! || (!m.recordStacks ? 0 : a === ACTION.alloc ? tail.extra[s]! : a === ACTION.oom ? tail.address[s]! : 0);
      const e: TraceEntry = { action, addr: a === ACTION.oom ? 0 : tail.address[s]!, size, stream: tail.stream[s]!, time_us, frames: [] };
      if (a === ACTION.oom) {
        e.device_free = tail.extra[s]!;
        e.frames = withStack(m, stack, []);
      }
      if (a === ACTION.alloc) {
        e.frames = withStack(m, stack, frame(where(tail.step[s]!, tail.phase[s]!, tail.range[s] ? m.rangeName(tail.range[s]!) : null)));
        // Allocated inside a function the line profiler follows: that line is the nearest thing to
        // a stack frame we have, and memory_viz shows it first.
        const line = tail.line[s]! ? m.lineNames.get(tail.line[s]!) : undefined;
        if (line) e.frames.unshift(lineFrame(line));
      }
      traces[dev]!.push(e);
    }
  }

  let dropped = 0;
  let unplaced = 0;
  for (const d of m.devices) {
    const trace = traces[d.device]!;
    const segs = deviceSegments(m, d, trace);
    unplaced += segs.unplaced;
    const start = checkTrace(segs.segments, trace);
    if (start > 0) {
      dropped += start;
      traces[d.device] = trace.slice(start);
    }
    segments.push(...segs.segments);
  }
  if (unplaced > 0) notes.push(`${unplaced} live blocks lie in segments allocated before the monitor's records begin: shown in segments spanning just what the records touch`);
  if (dropped > 0) notes.push(`${dropped} trace entries at the start did not add up to the segments (records lost or missed) and were left out`);
  return {
    segments,
    device_traces: traces,
    external_annotations: annotations,
    gpumem: { writer: FILE, pid: m.pid, trace_entries: traces.reduce((x, t) => x + t.length, 0), records: tail ? tail.total - tail.first : 0, records_seen: tail?.total ?? 0, trace_dropped: dropped, unplaced_blocks: unplaced, notes },
  };
}

/** The device's segments, each tiled by its blocks (live, pending free, and the free ranges between). */
function deviceSegments(m: ProfilerModel, d: DeviceState, trace: TraceEntry[]): { segments: SegmentOut[]; unplaced: number } {
  // From the trace: blocks freed but not yet completed (record_stream), and what each live
  // block's program asked for (the block is rounded up).
  const pending = new Map<number, number>();
  const requested = new Map<number, number>();
  let expandable = false;
  for (const e of trace) {
    if (e.action === "alloc") requested.set(e.addr, e.size);
    else if (e.action === "free_requested") pending.set(e.addr, blockSize(e.size));
    else if (e.action === "free_completed") pending.delete(e.addr);
    else if (e.action === "segment_map") expandable = true;
  }
  const b = d.blocks;
  const live = b.slotsByAddress();
  const blockFrames = (s: number): Frame[] => {
    const name = b.names[s];
    const line = d.categoryOf(s);
    const at = b.isResynced(s) ? "seen in a resync" : `allocated ${where(b.step[s]!, b.phase[s]!, b.range[s] ? m.rangeName(b.range[s]!) : null)}`;
    return withStack(m, b.stack[s]!, frame(`${name ? `${name} ` : ""}(${line}) ${at}`));
  };
  // Candidates for the segments, by address: live blocks, and blocks freed but not yet completed
  // (a pending block overlapping a live one is not real: the live one wins).
  const liveOut = Array.from(live, (s): BlockOut => {
    const addr = b.address[s]!;
    const size = b.size[s]!;
    const req = requested.get(addr);
    return { address: addr, size, requested_size: req !== undefined && req <= size ? req : size, state: "active_allocated", frames: blockFrames(s) };
  });
  const overlapsLive = (a: number, z: number) => {
    let lo = 0;
    let hi = liveOut.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (liveOut[mid]!.address + liveOut[mid]!.size <= a) lo = mid + 1;
      else hi = mid;
    }
    return lo < liveOut.length && liveOut[lo]!.address < z;
  };
  const pendingOut = [...pending.entries()]
    .filter(([pa, ps]) => !overlapsLive(pa, pa + ps))
    .map(([pa, ps]): BlockOut => ({ address: pa, size: ps, requested_size: ps, state: "active_pending_free", frames: [] }));
  const candidates = [...liveOut, ...pendingOut].sort((x, y) => x.address - y.address);
  const out: SegmentOut[] = [];
  const placed = new Set<BlockOut>();
  let k = 0;
  for (const seg of segmentMap(d).segments) {
    const end = seg.address + seg.size_bytes;
    while (k < candidates.length && candidates[k]!.address < seg.address) k++;
    const inside: BlockOut[] = [];
    while (k < candidates.length && candidates[k]!.address < end) inside.push(candidates[k++]!);
    const blocks = tile(seg.address, end, inside);
    for (const x of blocks) placed.add(x);
    out.push(segmentOf(d.device, seg.address, seg.size_bytes, seg.stream, expandable, blocks));
  }
  // Memory in no segment the monitor saw (segments allocated before it attached, or before a
  // lapped ring's oldest record): live blocks there, and blocks the trace allocates or frees
  // there. Each stretch of it becomes a segment of its own, so every block has a home and the
  // trace still adds up; the file's notes say how many blocks that concerns.
  const known: Array<[number, number]> = out.map((g) => [g.address, g.address + g.total_size]);
  for (const e of trace) if (e.action.startsWith("segment_")) known.push([e.addr, e.addr + e.size]);
  const overlapsKnown = (a: number, z: number) => known.some(([s0, s1]) => a < s1 && s0 < z);
  const strayBlocks = candidates.filter((x) => !placed.has(x) && !overlapsKnown(x.address, x.address + x.size));
  const stray: Array<[number, number]> = strayBlocks.filter((x) => x.state === "active_allocated").map((x) => [x.address, x.address + x.size]);
  for (const e of trace) {
    if (e.action !== "alloc" && e.action !== "free_requested" && e.action !== "free_completed") continue;
    const z = e.addr + blockSize(e.size);
    if (!overlapsKnown(e.addr, z)) stray.push([e.addr, z]);
  }
  stray.sort((x, y) => x[0] - y[0]);
  const merged: Array<[number, number]> = [];
  for (const [a, z] of stray) {
    const last = merged[merged.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], z);
    else merged.push([a, z]);
  }
  k = 0;
  for (const [a, z] of merged) {
    while (k < strayBlocks.length && strayBlocks[k]!.address < a) k++;
    const inside: BlockOut[] = [];
    while (k < strayBlocks.length && strayBlocks[k]!.address < z) inside.push(strayBlocks[k++]!);
    out.push(segmentOf(d.device, a, z - a, 0, false, tile(a, z, inside)));
  }
  const unplaced = strayBlocks.filter((x) => x.state === "active_allocated").length;
  out.sort((x, y) => x.address - y.address);
  return { segments: out, unplaced };
}

/**
 * The blocks tiling [start, end): the candidates (by address) that fit, and the free ranges
 * between them. A candidate overlapping one placed before it, or spilling past the end, is left out.
 */
function tile(start: number, end: number, candidates: BlockOut[]): BlockOut[] {
  const blocks: BlockOut[] = [];
  let cursor = start;
  for (const x of candidates) {
    if (x.address < cursor || x.address + x.size > end) continue;
    if (x.address > cursor) blocks.push({ address: cursor, size: x.address - cursor, requested_size: 0, state: "inactive", frames: [] });
    blocks.push(x);
    cursor = x.address + x.size;
  }
  if (end > cursor) blocks.push({ address: cursor, size: end - cursor, requested_size: 0, state: "inactive", frames: [] });
  return blocks;
}

function segmentOf(device: number, address: number, size: number, stream: number, expandable: boolean, blocks: BlockOut[]): SegmentOut {
  let allocated = 0;
  let active = 0;
  let req = 0;
  let small = size === SMALL_SEGMENT;
  for (const x of blocks) {
    if (x.state === "active_allocated") allocated += x.size;
    if (x.state !== "inactive") (active += x.size), (req += x.requested_size);
    if (x.state !== "inactive" && x.size > SMALL_REQUEST) small = false;
  }
  return {
    device,
    address,
    total_size: size,
    allocated_size: allocated,
    active_size: active,
    requested_size: req,
    stream,
    segment_type: small ? "small" : "large",
    segment_pool_id: new Tuple([0, 0]),
    is_expandable: expandable,
    frames: [],
    blocks,
  };
}

/**
 * Walk the trace backwards from the segments as memory_viz does, and return where a consistent
 * trace starts: 0 when every entry adds up; otherwise one past the last entry that does not
 * (a free of a block that is not there, a block outside every segment, a segment freed twice).
 */
export function checkTrace(segments: Array<Pick<SegmentOut, "address" | "total_size" | "blocks">>, trace: Array<Pick<TraceEntry, "action" | "addr" | "size">>): number {
  // Segments as sorted, disjoint [start, end) intervals; blocks by address.
  const starts: number[] = [];
  const ends: number[] = [];
  const blocks = new Map<number, number>();
  for (const s of [...segments].sort((x, y) => x.address - y.address)) {
    starts.push(s.address);
    ends.push(s.address + s.total_size);
    for (const x of s.blocks) if (x.state !== "inactive") blocks.set(x.address, x.size);
  }
  const find = (addr: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (addr < starts[mid]!) hi = mid - 1;
      else if (addr >= ends[mid]!) lo = mid + 1;
      else return mid;
    }
    return -1;
  };
  const inside = (addr: number, size: number) => {
    const i = find(addr);
    return i >= 0 && addr + Math.max(size, 1) <= ends[i]!;
  };
  const insertAt = (addr: number) => {
    let i = 0;
    while (i < starts.length && starts[i]! < addr) i++;
    return i;
  };
  for (let i = trace.length - 1; i >= 0; i--) {
    const e = trace[i]!;
    const prev = i > 0 ? trace[i - 1] : undefined;
    switch (e.action) {
      case "free_completed": {
        const size = blockSize(e.size);
        if (!inside(e.addr, size)) return i + 1;
        blocks.set(e.addr, size);
        // memory_viz folds a free_requested right before it into one "free": skip that one too.
        if (prev && prev.action === "free_requested" && prev.addr === e.addr) i--;
        break;
      }
      case "free_requested":
        if (!blocks.has(e.addr)) return i + 1;
        break;
      case "alloc":
        blocks.delete(e.addr);
        break;
      case "segment_free":
      case "segment_unmap": {
        // Backwards, the segment comes back: it must not overlap one that is there.
        const j = insertAt(e.addr);
        if ((j > 0 && ends[j - 1]! > e.addr) || (j < starts.length && starts[j]! < e.addr + e.size)) return i + 1;
        starts.splice(j, 0, e.addr);
        ends.splice(j, 0, e.addr + e.size);
        // Mapped pages next to a mapped range are one range (memory_viz merges them too).
        if (e.action === "segment_unmap") mergeAround(starts, ends, j);
        break;
      }
      case "segment_alloc":
      case "segment_map": {
        // Backwards, the segment goes: nothing may be left in it.
        const j = find(e.addr);
        if (j < 0 || e.addr + e.size > ends[j]!) return i + 1;
        if (e.action === "segment_alloc" && (starts[j] !== e.addr || ends[j] !== e.addr + e.size)) return i + 1;
        for (const [a] of blocks) if (a >= e.addr && a < e.addr + e.size) return i + 1;
        const [s0, e0] = [starts[j]!, ends[j]!];
        starts.splice(j, 1);
        ends.splice(j, 1);
        const pieces: Array<[number, number]> = [];
        if (s0 < e.addr) pieces.push([s0, e.addr]);
        if (e.addr + e.size < e0) pieces.push([e.addr + e.size, e0]);
        starts.splice(j, 0, ...pieces.map((p) => p[0]));
        ends.splice(j, 0, ...pieces.map((p) => p[1]));
        break;
      }
      default:
        break;
    }
  }
  return 0;
}

function mergeAround(starts: number[], ends: number[], j: number): void {
  if (j + 1 < starts.length && ends[j] === starts[j + 1]) {
    ends[j] = ends[j + 1]!;
    starts.splice(j + 1, 1);
    ends.splice(j + 1, 1);
  }
  if (j > 0 && ends[j - 1] === starts[j]) {
    ends[j - 1] = ends[j]!;
    starts.splice(j, 1);
    ends.splice(j, 1);
  }
}
