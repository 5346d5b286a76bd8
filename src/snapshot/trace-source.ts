// A PyTorch memory snapshot as a replay source for the model, like a recorded ring: first the
// memory that existed before the recording (before.ts), then the trace's entries of every device
// and the `external_annotations` (record_function START/END) merged in time order, read batch by
// batch so a trace of millions of entries is never copied whole.
//
// A snapshot has no phase or step marks; they are inferred, per alloc, from what it holds:
//   - inside PyTorch's `Optimizer.step#…` range: optimizer; its end begins the next step
//   - inside a range named like forward / backward: that phase
//   - else the alloc's frames (frames.ts): autograd → backward, torch/optim → optimizer, a
//     module's forward → forward; no frames after a forward and before the optimizer step is
//     autograd's engine thread (it runs no Python), so backward
// Frees keep the phase they fall in. Without optimizer ranges, the step ends where allocs leave
// the optimizer's code.

import { ACTION, type EventBatch, type RingHeader, newEventBatch } from "../ffi/events";
import type { EventSource } from "../profiler/feed";
import { beforeRecording, type BeforeRecording } from "./before";
import { HINT_BACKWARD, HINT_FORWARD, HINT_NO_FRAMES, HINT_OPTIMIZER } from "./frames";
import { SnapshotError } from "./pickle";
import { columnsOf, type TraceColumns } from "./trace-columns";

/** The range PyTorch opens around every optimizer step (`Optimizer.step#Adam.step`). */
const OPTIMIZER_STEP = "Optimizer.step#";
const FORWARD = 1;
const BACKWARD = 2;
const OPTIMIZER = 3;

interface Annotation {
  device: number;
  name: string;
  start: boolean;
  time_us: number;
}

export interface SnapshotReplay {
  source: EventSource;
  /** Range id → name, for ReplayOptions.ranges. */
  ranges: Record<string, string>;
  devices: number[];
  /** "recorded": every entry had time_us; "order": some had none and took their predecessor's. */
  time_source: "recorded" | "order";
  /** Per device: what existed before the recording's first entry (and how its blocks' sizes are known: block_sizes). */
  before: BeforeRecording[];
  /** Records the source yields in all (memory from before, entries, annotation marks). */
  events: number;
}

function annotationsOf(v: unknown): Annotation[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new SnapshotError("external_annotations must be a list");
  const out = v.map((a, k): Annotation => {
    const where = `external_annotations[${k}]`;
    if (!a || typeof a !== "object" || typeof a.name !== "string" || (a.stage !== "START" && a.stage !== "END")) throw new SnapshotError(`${where}: needs a name and stage START or END`);
    if (typeof a.time_us !== "number" || !(a.time_us >= 0)) throw new SnapshotError(`${where}: time_us must be a non-negative number, got ${JSON.stringify(a.time_us)}`);
    return { device: typeof a.device === "number" ? a.device : -1, name: a.name, start: a.stage === "START", time_us: a.time_us };
  });
  // Stable: marks of one time keep their order.
  return out.map((a, i) => [a, i] as const).sort((x, y) => x[0].time_us - y[0].time_us || x[1] - y[1]).map((x) => x[0]);
}

/** Entry indices in time order: each device's entries keep their record order; devices merge by time. */
function mergeOrder(t: TraceColumns): { order: Uint32Array | null; ordered: boolean } {
  const last = new Map<number, number>();
  let ordered = false;
  for (let i = 0; i < t.count; i++) {
    const d = t.device[i]!;
    if (Number.isNaN(t.time_us[i]!)) {
      ordered = true;
      t.time_us[i] = last.get(d) ?? 0;
    }
    last.set(d, t.time_us[i]!);
  }
  if (last.size <= 1) return { order: null, ordered }; // one device: record order is time order
  const order = new Uint32Array(t.count);
  const lists = new Map<number, number[]>();
  for (let i = 0; i < t.count; i++) (lists.get(t.device[i]!) ?? lists.set(t.device[i]!, []).get(t.device[i]!)!).push(i);
  const ls = [...lists.values()];
  const at = ls.map(() => 0);
  for (let k = 0; k < t.count; k++) {
    let best = -1;
    for (let j = 0; j < ls.length; j++) {
      if (at[j]! >= ls[j]!.length) continue;
      if (best < 0 || t.time_us[ls[j]![at[j]!]!]! < t.time_us[ls[best]![at[best]!]!]!) best = j;
    }
    order[k] = ls[best]![at[best]!++]!;
  }
  return { order, ordered };
}

/** One record into a batch (step and phase are the caller's). */
function put(b: EventBatch, n: number, action: number, device: number, address: number, size: number, stream: number, time: number, range: number): void {
  b.action[n] = action;
  b.device[n] = device;
  b.address[n] = address;
  b.size[n] = size;
  b.stream[n] = stream;
  b.time_us[n] = time;
  b.range[n] = range;
  b.extra[n] = 0;
  b.line[n] = 0;
  b.stack[n] = 0;
}

/** A snapshot's trace (already in columns), annotations, final segments and allocator settings → a replay source. */
export function snapshotReplay(trace: TraceColumns, annotations: unknown, segments: unknown, settings?: unknown): SnapshotReplay {
  const anns = annotationsOf(annotations);
  // Alloc and free sizes become block sizes (in place), before the merge reads them.
  const before = beforeRecording(trace, segments, settings);
  const { order, ordered } = mergeOrder(trace);
  const at = (k: number) => (order === null ? k : order[k]!);
  const optimizerRanges = anns.some((a) => a.name.startsWith(OPTIMIZER_STEP));
  const t0 = Math.min(trace.count ? trace.time_us[at(0)]! : Infinity, anns.length ? anns[0]!.time_us : Infinity);
  const start = Number.isFinite(t0) ? t0 : 0;

  // Memory from before, as records at the first entry's time: segments, then blocks grouped by
  // phase (other, optimizer, forward, backward), so the model gives each group its category.
  const pre: Array<[action: number, device: number, address: number, size: number, stream: number, phase: number]> = [];
  for (const b of before) {
    for (const s of b.segments) pre.push([s.mapped ? ACTION.segment_map : ACTION.segment_alloc, b.device, s.address, s.size, s.stream, 0]);
    for (const phase of [0, OPTIMIZER, FORWARD, BACKWARD]) {
      for (const k of b.blocks) {
        const p = k.hint === HINT_BACKWARD ? BACKWARD : k.hint === HINT_OPTIMIZER ? OPTIMIZER : k.hint === HINT_FORWARD ? FORWARD : 0;
        if (p !== phase) continue;
        pre.push([ACTION.alloc, b.device, k.address, k.size, k.stream, phase]);
        if (k.pending_free) pre.push([ACTION.free_requested, b.device, k.address, k.size, k.stream, phase]);
      }
    }
  }

  const ids = new Map<string, number>();
  const ranges: Record<string, string> = {};
  for (const a of anns) {
    if (!ids.has(a.name)) {
      ids.set(a.name, ids.size + 1);
      ranges[String(ids.size)] = a.name;
    }
  }
  const devices = [...new Set([...trace.devices(), ...before.map((b) => b.device)])].sort((a, b) => a - b);
  const total = pre.length + trace.count + anns.length;

  // The cursor and the loop's state (what the marks and frames say so far).
  let preAt = 0;
  let entryAt = 0;
  let annAt = 0;
  let step = 0;
  let phase = 0;
  const stack: number[] = [];
  let inOptimizer = 0;
  let inForward = 0;
  let inBackward = 0;
  let afterForward = false;
  const isForward = (name: string) => /forward/i.test(name);
  const isBackward = (name: string) => /backward/i.test(name);

  const phaseOfAlloc = (hint: number): number => {
    if (inOptimizer > 0) return OPTIMIZER;
    if (inBackward > 0 || hint === HINT_BACKWARD) return BACKWARD;
    if (inForward > 0 || hint === HINT_FORWARD) {
      afterForward = true;
      return FORWARD;
    }
    if (hint === HINT_OPTIMIZER) return OPTIMIZER;
    if (hint === HINT_NO_FRAMES && afterForward) return BACKWARD;
    return 0;
  };

  const header: RingHeader = {
    abi_version: 0,
    capacity: total,
    pid: 0,
    mode: "none",
    n_devices: devices.length,
    attach_unix_us: start,
    updated_unix_us: Math.max(start, trace.count ? trace.time_us[at(trace.count - 1)]! : 0, anns.length ? anns[anns.length - 1]!.time_us : 0),
    current_step: 0,
    current_range: 0,
    current_line: 0,
    current_phase: 0,
    closed: true,
    write_index: total,
    totals: [],
  };

  /** Records read so far: the stream position (one record a position; nothing is folded here). */
  let emitted = 0;
  const source: EventSource = {
    header: () => ({ ...header, current_step: step }),
    read(batch: EventBatch, until = Infinity) {
      const cap = Math.min(batch.action.length, Math.max(0, until - emitted));
      let n = 0;
      for (; n < cap && preAt < pre.length; n++, preAt++) {
        const [a, d, address, size, stream, p] = pre[preAt]!;
        put(batch, n, a, d, address, size, stream, start, 0);
        batch.step[n] = 0;
        batch.phase[n] = p;
      }
      for (; n < cap; n++) {
        const i = entryAt < trace.count ? at(entryAt) : -1;
        const te = i >= 0 ? trace.time_us[i]! : Infinity;
        const ann = annAt < anns.length ? anns[annAt]! : null;
        if (i < 0 && ann === null) break;
        if (ann !== null && ann.time_us < te) {
          annAt++;
          const id = ids.get(ann.name)!;
          const optimizerStep = ann.name.startsWith(OPTIMIZER_STEP);
          if (ann.start) {
            stack.push(id);
            if (optimizerStep) {
              inOptimizer++;
              afterForward = false;
            } else if (isBackward(ann.name)) inBackward++;
            else if (isForward(ann.name)) inForward++;
          } else {
            const at = stack.lastIndexOf(id);
            if (at >= 0) stack.splice(at, 1);
            if (optimizerStep && inOptimizer > 0 && --inOptimizer === 0) step++;
            else if (!optimizerStep && isBackward(ann.name)) inBackward = Math.max(0, inBackward - 1);
            else if (!optimizerStep && isForward(ann.name) && inForward > 0 && --inForward === 0) afterForward = true;
          }
          // As the hook writes them (gpumem_ring.h): an enter or exit record names its range.
          put(batch, n, ann.start ? ACTION.range_enter : ACTION.range_exit, ann.device, 0, 0, 0, ann.time_us, id);
          if (inOptimizer > 0) phase = OPTIMIZER;
          else if (phase === OPTIMIZER) phase = 0;
        } else {
          entryAt++;
          const a = trace.action[i]!;
          if (a === ACTION.alloc || a === ACTION.oom) {
            const next = phaseOfAlloc(trace.hint[i]!);
            // Without Optimizer.step ranges, leaving the optimizer's code ends the step.
            if (!optimizerRanges && phase === OPTIMIZER && next !== OPTIMIZER) {
              step++;
              afterForward = next === FORWARD;
            }
            phase = next;
          }
          put(batch, n, a, trace.device[i]!, trace.address[i]!, trace.size[i]!, trace.stream[i]!, te, stack.length ? stack[stack.length - 1]! : 0);
          if (a === ACTION.oom) batch.extra[n] = trace.deviceFree.get(i) ?? 0;
          // Where it was allocated (an OOM: where it was asked for): the entry's stack, resolved by
          // the model's stacks (model.stacks).
          if (a === ACTION.alloc || a === ACTION.oom) batch.stack[n] = trace.stack[i]!;
        }
        batch.step[n] = step;
        batch.phase[n] = phase;
      }
      batch.count = n;
      emitted += n;
      return { count: n, lost: 0 };
    },
  };
  return { source, ranges, devices, time_source: ordered ? "order" : "recorded", before, events: total };
}

/** A snapshot already parsed into plain objects (a JSON fixture, `_snapshot()` dumped as JSON). */
export function snapshotReplayOf(snapshot: { device_traces?: unknown; external_annotations?: unknown; segments?: unknown; allocator_settings?: unknown }): SnapshotReplay {
  if (!snapshot || typeof snapshot !== "object") throw new SnapshotError("not a PyTorch memory snapshot: not a dict");
  return snapshotReplay(columnsOf(snapshot.device_traces), snapshot.external_annotations, snapshot.segments, snapshot.allocator_settings);
}

/** Every record of a replay source in one batch (tests, small snapshots). */
export function readAll(r: SnapshotReplay): EventBatch {
  const batch = newEventBatch(Math.max(1, r.events));
  r.source.read(batch);
  return batch;
}
