// What a PyTorch memory snapshot says, as plain numbers (pure: the parsed pickle in, a summary out).
//
// Summary shape (what `gpumem-tui view FILE --json` prints):
//   devices[]: { device, segments, blocks, reserved_bytes, allocated_bytes, active_bytes,
//                inactive_bytes, largest_free_block_bytes, expandable_segments }
//   top_allocations[]: { device, address, size_bytes, requested_bytes, frames: ["file:line name"] }
//   trace: { entries, by_action: {alloc: n, …}, first_time_us, last_time_us }, null without history
//   annotations: { count, names: [distinct record_function names] }
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
  expandable_segments: number;
}

export interface SnapshotSummary {
  devices: DeviceSummary[];
  top_allocations: { device: number; address: number; size_bytes: number; requested_bytes: number | null; frames: string[] }[];
  trace: { entries: number; by_action: Record<string, number>; first_time_us: number | null; last_time_us: number | null } | null;
  annotations: { count: number; names: string[] };
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
  for (const [i, seg] of snapshot.segments.entries()) {
    if (!isObj(seg)) throw new SnapshotError(`segments[${i}] is not a dict`);
    const device = num(seg.device);
    let d = byDevice.get(device);
    if (!d) byDevice.set(device, (d = { device, segments: 0, blocks: 0, reserved_bytes: 0, allocated_bytes: 0, active_bytes: 0, inactive_bytes: 0, largest_free_block_bytes: 0, expandable_segments: 0 }));
    d.segments++;
    d.reserved_bytes += num(seg.total_size);
    if (seg.is_expandable === true) d.expandable_segments++;
    for (const b of list(seg.blocks, `segments[${i}].blocks`)) {
      if (!isObj(b)) continue;
      d.blocks++;
      const size = num(b.size);
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
    top_allocations: live.slice(0, top),
    trace,
    annotations: { count: anns.length, names: [...new Set(anns.map((a) => String(a.name)))] },
    oom,
  };
}
