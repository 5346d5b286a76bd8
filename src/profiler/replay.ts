// Replay: a recorded ring (or anything that reads like one) through the same model as a live
// process, as a stream of plain states (one NDJSON line each) ending with the final state and the
// findings, or to its end at once. Pure orchestration: the source is read through feed, time to
// wait comes from an injected clock, and nothing here writes anywhere.

import type { BlockStacks } from "./user-frame";
import { feed, FeedSource, type EventSource, type Fed } from "./feed";
import { findings, type Finding } from "./findings";
import { createModel, type NamedTensor, type ProfilerModel } from "./model";
import { resyncFromSnapshot } from "./snapshot-resync";
import type { Seed } from "./seed";
import type { SnapshotSegment } from "./device";
import { breakdown, steps, type StepBreakdown, type StepLine } from "./breakdown";
import { categories, summary, type Categories, type Summary } from "./queries";
import { segmentMap, type SegmentMap } from "./segment-map";

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
  /** The manifest's line table (id → "file.py:42: code"), for the Lines screen. */
  lines?: Record<string, string>;
  /** Feed this model instead of a new one (a view that keeps showing it after the replay). */
  model?: ProfilerModel;
  /** The agent's `names` replies saved with the recording: each applied once the replay has read
   *  the ring up to its write index (null: at the end). */
  names?: SavedNames[];
  /** Where the blocks alive at the end were allocated (a snapshot's stacks): findings name lines. */
  stacks?: BlockStacks | null;
  /** What the records carry beyond the events (system/manifest.ts recordFields; `stacks` names the ids). */
  segmentPools?: boolean;
  allocStacks?: boolean;
  /** The allocator's settings (the manifest's `alloc_conf`): how blocks are rounded and split. */
  allocConf?: string | null;
  /** An attach's seed (the recording's NAME.seed.json): the blocks from before the attach, each with
   *  torch's size, set before the first record as a live agent's is (collect/live.ts seedOf). */
  seed?: Seed | null;
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
 * A recording being read into a model: its tables and its header's pid and mode first, each saved
 * names reply where it was taken, the header's totals at the end (they are the recording's last
 * moment, not its first, so that what is read before shows the replayed moment).
 */
class Playthrough {
  readonly from: FeedSource;
  private readonly names: SavedNames[];

  constructor(
    readonly model: ProfilerModel,
    private readonly source: EventSource,
    opts: ReplayOptions,
  ) {
    if (opts.ranges) model.setRanges(opts.ranges);
    if (opts.lines) model.setLines(opts.lines);
    if (opts.stacks) model.stacks = opts.stacks;
    if (opts.segmentPools || opts.allocStacks || opts.allocConf) model.setRecordFields({ segmentPools: opts.segmentPools, allocStacks: opts.allocStacks, allocConf: opts.allocConf });
    if (opts.seed) model.setSeed(opts.seed);
    model.setHeader(source.header(), { totals: false });
    this.from = new FeedSource(source, opts.batch_size ?? 65_536);
    this.names = [...(opts.names ?? [])].sort((a, b) => (a.write_index ?? Infinity) - (b.write_index ?? Infinity));
  }

  /** Feeds the records before `time_us`, each names reply applied between the records of its
   *  moment: stops at the end, or with the first record at or after `time_us` waiting. */
  to(time_us: number): Fed {
    for (;;) {
      while (!this.from.waiting && this.names.length > 0 && (this.names[0]!.write_index ?? Infinity) <= this.from.position) this.model.setNames(this.names.shift()!.tensors);
      const fed = feed(this.model, this.from, { position: this.names[0]?.write_index ?? Infinity, time_us });
      if (fed.stop !== "position") return fed;
    }
  }

  /** The recorded time of the record waiting after `to` stopped at a moment. */
  nextTime(): number {
    return this.from.nextTime;
  }

  /** After the last record: names taken after it, and the header's totals at the end. */
  end(): void {
    for (const n of this.names.splice(0)) this.model.setNames(n.tensors);
    this.model.setHeader(this.source.header(), { streamEnd: true });
  }
}

/**
 * Feed a source to the model, yielding a state every `state_every_us` of recorded time and the
 * final state (with the findings) last.
 */
export async function* replay(source: EventSource, opts: ReplayOptions = {}): AsyncGenerator<ReplayLine> {
  const speed = opts.speed;
  if (speed !== undefined && !(speed > 0 && Number.isFinite(speed))) throw new RangeError(`--speed must be a positive number, got ${speed}`);
  if (speed !== undefined && !opts.clock) throw new TypeError("replay at a given speed needs a clock (ReplayOptions.clock)");
  const every = opts.state_every_us ?? 1_000_000;
  if (!(every > 0)) throw new RangeError(`state_every_us must be positive, got ${every}`);
  const m = opts.model ?? createModel();
  const play = new Playthrough(m, source, opts);
  // The first state is due `every` after the first record; the wall clock starts there too.
  if (play.to(-Infinity).stop !== "end") {
    const firstEvent = play.nextTime();
    const wallStart = opts.clock ? opts.clock.now_us() : NaN;
    let nextState = firstEvent + every;
    while (play.to(nextState).stop !== "end") {
      if (speed !== undefined) {
        const wait = wallStart + (nextState - firstEvent) / speed - opts.clock!.now_us();
        if (wait > 0) await opts.clock!.sleep(wait);
      }
      yield stateLine(m);
      // Skip states for recorded time in which nothing happened.
      nextState += Math.max(1, Math.ceil((play.nextTime() - nextState + 1) / every)) * every;
    }
  }
  play.end();
  yield stateLine(m);
  yield finalLine(m);
}

/**
 * A recording read to its end as fast as it goes (`replay FILE --snapshot`, `view FILE`); a
 * snapshot's segments, where given, then hold the blocks from before its trace began, and the
 * model takes them too (the replay ends on them already; this keeps it so where the trace
 * disagrees with them).
 */
export function replayToEnd(source: EventSource, opts: Omit<ReplayOptions, "speed" | "clock" | "state_every_us"> & { segments?: SnapshotSegment[] | null } = {}): ProfilerModel {
  const m = opts.model ?? createModel();
  const play = new Playthrough(m, source, opts);
  play.to(Infinity);
  play.end();
  if (opts.segments) resyncFromSnapshot(m, opts.segments, Math.max(0, ...m.devices.map((d) => d.lastTime_us)));
  return m;
}
