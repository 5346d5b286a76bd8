// A PyTorch memory snapshot's `device_traces` (torch.cuda.memory._snapshot(), parsed to JSON)
// as an EventBatch, so a snapshot replays through the same model as a recorded ring. Pure: it
// takes parsed objects and returns columns. `external_annotations` (record_function START/END,
// PyTorch ≥ 2.6) become ranges. A snapshot has no phase or step marks; PyTorch's own
// `Optimizer.step#…` range stands in: inside it the phase is "optimizer", and its end begins the
// next step. Forward and backward cannot be told apart from a snapshot: they stay "other".

import { ACTION, newEventBatch, type EventBatch, type RingHeader } from "../ffi/events";
import { batchSource, type EventSource } from "./replay";

/** One entry of device_traces[device] as PyTorch writes it. */
export interface SnapshotTraceEntry {
  action: string;
  addr?: number;
  size?: number;
  stream?: number;
  time_us?: number;
  /** oom entries: bytes free on the device. */
  device_free?: number;
  [k: string]: unknown;
}

export interface SnapshotAnnotation {
  device?: number;
  name: string;
  stage: string; // "START" | "END"
  time_us: number;
}

export interface SnapshotLike {
  device_traces: SnapshotTraceEntry[][];
  external_annotations?: SnapshotAnnotation[];
  [k: string]: unknown;
}

export interface ConvertedTrace {
  batch: EventBatch;
  /** Range id → name, for ProfilerModel.setRanges / ReplayOptions.ranges. */
  ranges: Record<string, string>;
  devices: number[];
  /** "recorded": every entry had time_us; "order": some had none and took their predecessor's. */
  time_source: "recorded" | "order";
  /** A header for replay: pid 0, no totals (the model sums them from the events). */
  header: RingHeader;
}

/** The range PyTorch opens around every optimizer step (`Optimizer.step#Adam.step`). */
const OPTIMIZER_STEP = "Optimizer.step#";
const PHASE_OPTIMIZER = 3;

const TRACE_ACTIONS: Record<string, number> = {
  alloc: ACTION.alloc,
  free_requested: ACTION.free_requested,
  free_completed: ACTION.free_completed,
  segment_alloc: ACTION.segment_alloc,
  segment_free: ACTION.segment_free,
  segment_map: ACTION.segment_map,
  segment_unmap: ACTION.segment_unmap,
  snapshot: ACTION.snapshot,
  oom: ACTION.oom,
};

function nonNegative(v: unknown, what: string, where: string, fallback?: number): number {
  if (v === undefined && fallback !== undefined) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new TypeError(`${where}: ${what} must be a non-negative number, got ${JSON.stringify(v)}`);
  return v;
}

/** Convert a snapshot (or its `device_traces` alone) to one time-ordered EventBatch. */
export function snapshotTraceToBatch(input: SnapshotLike | SnapshotTraceEntry[][]): ConvertedTrace {
  const traces = Array.isArray(input) ? input : input?.device_traces;
  if (!Array.isArray(traces))
    throw new TypeError("not a PyTorch memory snapshot: no device_traces list (was it recorded with torch.cuda.memory._record_memory_history()?)");
  const annotations = Array.isArray(input) ? [] : (input.external_annotations ?? []);
  if (!Array.isArray(annotations)) throw new TypeError("external_annotations must be a list");

  // Rows: [time, device, order, kind] with kind = entry or annotation; sorted by time then order.
  interface Row {
    t: number;
    device: number;
    order: number;
    entry?: SnapshotTraceEntry;
    ann?: SnapshotAnnotation;
  }
  const rows: Row[] = [];
  let ordered = false;
  let order = 0;
  traces.forEach((list, device) => {
    if (!Array.isArray(list)) throw new TypeError(`device_traces[${device}] must be a list of trace entries`);
    if (list.length > 0 && device > 127) throw new RangeError(`device_traces[${device}]: device index above 127`);
    let last = 0;
    list.forEach((e, k) => {
      const where = `device_traces[${device}][${k}]`;
      if (!e || typeof e !== "object" || typeof e.action !== "string") throw new TypeError(`${where}: an entry needs an action string`);
      if (!(e.action in TRACE_ACTIONS)) throw new TypeError(`${where}: unknown action ${JSON.stringify(e.action)} (known: ${Object.keys(TRACE_ACTIONS).join(", ")})`);
      let t: number;
      if (e.time_us === undefined) {
        ordered = true;
        t = last;
      } else t = nonNegative(e.time_us, "time_us", where);
      last = t;
      rows.push({ t, device, order: order++, entry: e });
    });
  });
  annotations.forEach((a, k) => {
    const where = `external_annotations[${k}]`;
    if (!a || typeof a.name !== "string" || (a.stage !== "START" && a.stage !== "END")) throw new TypeError(`${where}: needs a name and stage START or END`);
    rows.push({ t: nonNegative(a.time_us, "time_us", where), device: a.device ?? -1, order: order++, ann: a });
  });
  rows.sort((a, b) => a.t - b.t || a.order - b.order);

  const ids = new Map<string, number>();
  const ranges: Record<string, string> = {};
  const stack: number[] = [];
  let step = 0;
  let inOptimizer = 0;
  const batch = newEventBatch(Math.max(1, rows.length));
  const devices = new Set<number>();
  let n = 0;
  for (const r of rows) {
    if (r.ann) {
      const name = r.ann.name;
      let id = ids.get(name);
      if (id === undefined) {
        id = ids.size + 1;
        ids.set(name, id);
        ranges[String(id)] = name;
      }
      const optimizerStep = name.startsWith(OPTIMIZER_STEP);
      if (r.ann.stage === "START") {
        stack.push(id);
        if (optimizerStep) inOptimizer++;
      } else {
        const at = stack.lastIndexOf(id);
        if (at >= 0) stack.splice(at, 1);
        if (optimizerStep && inOptimizer > 0 && --inOptimizer === 0) step++;
      }
      batch.action[n] = r.ann.stage === "START" ? ACTION.range_enter : ACTION.range_exit;
      batch.device[n] = r.device;
      // As the hook writes them (gpumem_ring.h): an enter or exit record names its range.
      batch.range[n] = id;
    } else {
      const e = r.entry!;
      const where = `device_traces[${r.device}]`;
      const action = TRACE_ACTIONS[e.action]!;
      batch.action[n] = action;
      batch.device[n] = r.device;
      batch.address[n] = nonNegative(e.addr, "addr", where, 0);
      batch.size[n] = nonNegative(e.size, "size", where, 0);
      batch.stream[n] = typeof e.stream === "number" ? e.stream : 0;
      batch.extra[n] = action === ACTION.oom ? nonNegative(e.device_free, "device_free", where, 0) : 0;
      devices.add(r.device);
    }
    batch.time_us[n] = r.t;
    if (!r.ann) batch.range[n] = stack.length ? stack[stack.length - 1]! : 0;
    batch.step[n] = step;
    batch.phase[n] = inOptimizer > 0 ? PHASE_OPTIMIZER : 0;
    n++;
  }
  batch.count = n;
  const devs = [...devices].sort((a, b) => a - b);
  return {
    batch,
    ranges,
    devices: devs,
    time_source: ordered ? "order" : "recorded",
    header: {
      abi_version: 0,
      capacity: n,
      pid: 0,
      mode: "none",
      n_devices: devs.length,
      attach_unix_us: rows.length ? rows[0]!.t : 0,
      updated_unix_us: rows.length ? rows[rows.length - 1]!.t : 0,
      current_step: step,
      current_range: 0,
      current_line: 0,
      current_phase: 0,
      closed: true,
      write_index: n,
      totals: [],
    },
  };
}

/** A snapshot as a replay source (with its range names for ReplayOptions.ranges). */
export function snapshotSource(input: SnapshotLike | SnapshotTraceEntry[][]): { source: EventSource; ranges: Record<string, string>; time_source: "recorded" | "order" } {
  const c = snapshotTraceToBatch(input);
  return { source: batchSource(c.header, [c.batch]), ranges: c.ranges, time_source: c.time_source };
}
