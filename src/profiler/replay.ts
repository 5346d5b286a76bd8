// Replay: a recorded ring (or anything that reads like one) through the same model as a live
// process, as a stream of plain states (one NDJSON line each) ending with the final state and the
// findings. Pure orchestration: the source is read through its interface, time to wait comes from
// an injected clock, and nothing here writes anywhere.

import { newEventBatch, type EventBatch, type RingHeader } from "../ffi/events";
import { findings, type Finding } from "./findings";
import { createModel, type NamedTensor, type ProfilerModel } from "./model";
import { breakdown, steps, type StepBreakdown, type StepLine } from "./breakdown";
import { categories, summary, type Categories, type Summary } from "./queries";
import { segmentMap, type SegmentMap } from "./segments";

/** What replay reads: the ring reader (src/ffi/ring.ts) or a batch list (batchSource). */
export interface EventSource {
  header(): RingHeader;
  /** New records into `batch`, stopping at stream position `until` (records consumed so far,
   *  lost ones included). A source may fold two records into one (a ring reader opened with
   *  `fold`); next() then tells the position where counts no longer do. */
  read(batch: EventBatch, until?: number): { count: number; lost: number };
  next?(): number;
}

/** Wall time for paced replay: microseconds now, and a way to wait. */
export interface ReplayClock {
  now_us(): number;
  sleep(us: number): Promise<void>;
}

export interface ReplayOptions {
  /** 1 = as fast as it was recorded, 10 = ten times faster; absent = as fast as the model goes. */
  speed?: number;
  /** Required with `speed`. */
  clock?: ReplayClock;
  /** Recorded time between two states (default 1 s of the recording). */
  state_every_us?: number;
  /** Events read at once (default 65,536). */
  batch_size?: number;
  /** The manifest's range table (id → name). */
  ranges?: Record<string, string>;
  /** Feed this model instead of a new one (a view that keeps showing it after the replay). */
  model?: ProfilerModel;
  /** The agent's `names` replies saved with the recording: each applied once the replay has read
   *  the ring up to its write index (null: at the end). */
  names?: SavedNames[];
}

/** A `names` reply kept beside a recording (`x.names.json`). */
export interface SavedNames {
  tensors: NamedTensor[];
  write_index: number | null;
}

export interface ReplayStateLine {
  type: "state";
  /** Recorded time of the last event in this state. */
  time_us: number | null;
  events: number;
  lost_records: number;
  summary: Summary;
}

export interface ReplayFinalLine {
  type: "final";
  time_us: number | null;
  events: number;
  lost_records: number;
  summary: Summary;
  /** Per device: the kept steps, the last complete step's breakdown, live categories, segment map. */
  devices: Array<{
    device: number;
    steps: StepLine[];
    last_step: StepBreakdown;
    peak_step: StepBreakdown;
    categories: Categories;
    segments: Omit<SegmentMap, "segments"> & { n_segments: number };
  }>;
  findings: Finding[];
}

export type ReplayLine = ReplayStateLine | ReplayFinalLine;

function lastTime(m: ProfilerModel): number | null {
  let t = -Infinity;
  for (const d of m.devices) if (d.lastTime_us > t) t = d.lastTime_us;
  return t === -Infinity ? null : t;
}

export function stateLine(m: ProfilerModel): ReplayStateLine {
  return { type: "state", time_us: lastTime(m), events: m.eventsIngested, lost_records: m.lostRecords, summary: summary(m) };
}

/** The final state: totals, per-device breakdowns and categories, and the findings. */
export function finalLine(m: ProfilerModel): ReplayFinalLine {
  return {
    type: "final",
    time_us: lastTime(m),
    events: m.eventsIngested,
    lost_records: m.lostRecords,
    summary: summary(m),
    devices: m.devices.map((d) => {
      const s = steps(m, { device: d.device }).steps;
      let peak = s[0]!;
      for (const x of s) if (x.peak_allocated_bytes > peak.peak_allocated_bytes) peak = x;
      const { segments, ...map } = segmentMap(d);
      return {
        device: d.device,
        steps: s,
        last_step: breakdown(m, { device: d.device }),
        peak_step: breakdown(m, { device: d.device, step: peak.step }),
        categories: categories(m, { device: d.device }),
        segments: { ...map, n_segments: segments.length },
      };
    }),
    findings: findings(m),
  };
}

/**
 * Feed a source to the model, yielding a state every `state_every_us` of recorded time and the
 * final state (with the findings) last. A recorded header holds the totals at the end of the
 * recording: they are applied at the end, not the start, so that states show the replayed moment.
 */
export async function* replay(source: EventSource, opts: ReplayOptions = {}): AsyncGenerator<ReplayLine> {
  const speed = opts.speed;
  if (speed !== undefined && !(speed > 0 && Number.isFinite(speed))) throw new RangeError(`--speed must be a positive number, got ${speed}`);
  if (speed !== undefined && !opts.clock) throw new TypeError("replay at a given speed needs a clock (ReplayOptions.clock)");
  const every = opts.state_every_us ?? 1_000_000;
  if (!(every > 0)) throw new RangeError(`state_every_us must be positive, got ${every}`);
  const m = opts.model ?? createModel();
  if (opts.ranges) m.setRanges(opts.ranges);
  const header = source.header();
  m.setHeader(header, { totals: false });
  const batch = newEventBatch(opts.batch_size ?? 65_536);
  const names = [...(opts.names ?? [])].sort((a, b) => (a.write_index ?? Infinity) - (b.write_index ?? Infinity));
  let nextState = NaN;
  let firstEvent = NaN;
  let wallStart = NaN;
  // The stream position after the batch: records read and records lost so far (a reader starts
  // at 0). A read stops at the next saved names' position, so they are applied between the records
  // of their moment.
  let position = 0;
  for (;;) {
    const namesAt = names[0]?.write_index ?? Infinity;
    const { count, lost } = source.read(batch, namesAt);
    if (count === 0 && lost === 0) {
      if (names.length > 0 && namesAt <= position) {
        m.setNames(names.shift()!.tensors);
        continue;
      }
      break;
    }
    if (lost > 0) m.noteLost(lost);
    position = source.next ? source.next() : position + lost + count;
    let i = 0;
    while (i < count) {
      const t0 = batch.time_us[i]!;
      if (nextState !== nextState) {
        nextState = t0 + every;
        firstEvent = t0;
        if (opts.clock) wallStart = opts.clock.now_us();
      }
      // Up to the next state's moment (records are in time order, give or take two writer threads).
      let j = i;
      while (j < count && batch.time_us[j]! < nextState) j++;
      m.ingest(batch, 0, i, j);
      i = j;
      if (j < count) {
        if (speed !== undefined) {
          const due = wallStart + (nextState - firstEvent) / speed;
          const wait = due - opts.clock!.now_us();
          if (wait > 0) await opts.clock!.sleep(wait);
        }
        yield stateLine(m);
        // Skip states for recorded time in which nothing happened.
        const t = batch.time_us[j]!;
        nextState += Math.max(1, Math.ceil((t - nextState + 1) / every)) * every;
      }
    }
    while (names.length > 0 && (names[0]!.write_index ?? Infinity) <= position) m.setNames(names.shift()!.tensors);
  }
  for (const n of names) m.setNames(n.tensors);
  const end = source.header();
  m.setHeader(end, { streamEnd: true });
  yield stateLine(m);
  yield finalLine(m);
}

/** A source over batches already in memory (a converted snapshot trace, a test's events). */
export function batchSource(header: RingHeader, batches: EventBatch[]): EventSource {
  let k = 0;
  let offset = 0;
  return {
    header: () => header,
    read(out: EventBatch) {
      const cap = out.action.length;
      while (k < batches.length && offset >= batches[k]!.count) {
        k++;
        offset = 0;
      }
      if (k >= batches.length) {
        out.count = 0;
        return { count: 0, lost: 0 };
      }
      const src = batches[k]!;
      const n = Math.min(cap, src.count - offset);
      const cols = ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range"] as const;
      for (const c of cols) (out[c] as Float64Array).set((src[c] as Float64Array).subarray(offset, offset + n));
      offset += n;
      out.count = n;
      return { count: n, lost: 0 };
    },
  };
}
