// What a PyTorch memory snapshot says, as plain numbers (pure: the parsed pickle in, a summary out).
//
// Summary shape (what `gpumem-tui view FILE --json` prints):
//   devices[]: { device, segments, blocks, reserved_bytes, allocated_bytes, active_bytes,
//                inactive_bytes, largest_free_block_bytes, fragmentation, expandable_segments }
//                (fragmentation = 1 - largest free block / all free bytes: 0 when the free bytes are
//                one block or none, near 1 when they are many small holes)
//   segments[]: { device, address, stream, segment_type, total_bytes, allocated_bytes, active_bytes,
//                 blocks: [{ address, size_bytes, requested_bytes, state }] }  (address order)
//   top_allocations[]: { device, address, size_bytes, requested_bytes, frames: ["file:line name"] }
//   trace: { entries, by_action: {alloc: n, …}, first_time_us, last_time_us }, null without history
//   annotations: { count, names: [distinct record_function names],
//                  ranges: [{ device, name, start_us, end_us }] } (START/END paired per device and
//                  name, innermost first; end_us null when the snapshot was taken inside the range)
//   oom: [{ device, requested_bytes, free_bytes, time_us }]
import { SnapshotError, type PickleValue } from "./pickle";

type Obj = { [k: string]: PickleValue };

const isObj = (v: PickleValue | undefined): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
const list = (v: PickleValue | undefined, what: string): PickleValue[] => {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new SnapshotError(`${what} is not a list`);
  return v;
};
const num = (v: PickleValue | undefined): number => (typeof v === "number" ? v : 0);

export interface DeviceSummary {
  device: number;
  segments: number;
  blocks: number;
  reserved_bytes: number;
  allocated_bytes: number;
  active_bytes: number;
  inactive_bytes: number;
  largest_free_block_bytes: number;
  fragmentation: number;
  expandable_segments: number;
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
  top_allocations: { device: number; address: number; size_bytes: number; requested_bytes: number | null; frames: string[] }[];
  trace: { entries: number; by_action: Record<string, number>; first_time_us: number | null; last_time_us: number | null } | null;
  annotations: { count: number; names: string[]; ranges: AnnotationRange[] };
  oom: { device: number; requested_bytes: number; free_bytes: number; time_us: number | null }[];
}

function frames(v: PickleValue | undefined, n: number): string[] {
  return list(v, "frames")
    .filter(isObj)
    .slice(0, n)
    .map((f) => `${f.filename ?? "?"}:${f.line ?? "?"} ${f.name ?? ""}`.trim());
}

export function summarize(snapshot: PickleValue, top = 10): SnapshotSummary {
  if (!isObj(snapshot) || !Array.isArray(snapshot.segments)) {
    throw new SnapshotError("not a PyTorch memory snapshot: no `segments` list (a pickle of something else)");
  }
  const byDevice = new Map<number, DeviceSummary>();
  const live: SnapshotSummary["top_allocations"] = [];
  const segments: SegmentSummary[] = [];
  for (const [i, seg] of snapshot.segments.entries()) {
    if (!isObj(seg)) throw new SnapshotError(`segments[${i}] is not a dict`);
    const device = num(seg.device);
    let d = byDevice.get(device);
    if (!d) byDevice.set(device, (d = { device, segments: 0, blocks: 0, reserved_bytes: 0, allocated_bytes: 0, active_bytes: 0, inactive_bytes: 0, largest_free_block_bytes: 0, fragmentation: 0, expandable_segments: 0 }));
    d.segments++;
    d.reserved_bytes += num(seg.total_size);
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
      if (b.state === "active_allocated") {
        d.allocated_bytes += size;
        d.active_bytes += size;
        live.push({ device, address: num(b.address), size_bytes: size, requested_bytes: typeof b.requested_size === "number" ? b.requested_size : null, frames: frames(b.frames, 3) });
      } else if (b.state === "active_pending_free") {
        d.active_bytes += size;
      } else {
        d.inactive_bytes += size;
        d.largest_free_block_bytes = Math.max(d.largest_free_block_bytes, size);
      }
    }
  }
  live.sort((a, b) => b.size_bytes - a.size_bytes);
  segments.sort((a, b) => a.device - b.device || a.address - b.address);
  for (const d of byDevice.values()) d.fragmentation = d.inactive_bytes > 0 ? 1 - d.largest_free_block_bytes / d.inactive_bytes : 0;

  let trace: SnapshotSummary["trace"] = null;
  const oom: SnapshotSummary["oom"] = [];
  const traces = list(snapshot.device_traces, "device_traces");
  if (traces.length) {
    const by: Record<string, number> = {};
    let entries = 0;
    let first = Infinity;
    let last = -Infinity;
    traces.forEach((t, device) => {
      for (const e of list(t, `device_traces[${device}]`)) {
        if (!isObj(e)) continue;
        entries++;
        const action = String(e.action);
        by[action] = (by[action] ?? 0) + 1;
        if (typeof e.time_us === "number") (first = Math.min(first, e.time_us)), (last = Math.max(last, e.time_us));
        if (action === "oom") oom.push({ device, requested_bytes: num(e.size), free_bytes: num(e.device_free ?? e.addr), time_us: typeof e.time_us === "number" ? e.time_us : null });
      }
    });
    trace = { entries, by_action: by, first_time_us: Number.isFinite(first) ? first : null, last_time_us: Number.isFinite(last) ? last : null };
  }
  const anns = list(snapshot.external_annotations, "external_annotations").filter(isObj);
  return {
    devices: [...byDevice.values()].sort((a, b) => a.device - b.device),
    segments,
    top_allocations: live.slice(0, top),
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
