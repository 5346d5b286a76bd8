// Opening a snapshot for `view` and `replay`: read it piece by piece (read.ts), summarize what its
// segments hold, and play its trace through the model from the memory that existed before the
// recording, so the model ends on the snapshot's own totals and its categories, steps and
// findings are the ones a live process gets.

import { statSync } from "node:fs";
import { counted } from "../words";
import { categories, createModel, findings, MAX_STEPS, replayToEnd, summary, type Categories, type Finding, type ProfilerModel, type SnapshotSegment } from "../profiler";
import { readSnapshotFile, type ParsedSnapshot, type Progress } from "./read";
import { privatePools, summarize, type SnapshotSummary } from "./summary";
import type { BlockSizes } from "./before";
import { snapshotReplay, type SnapshotReplay } from "./trace-source";
import { snapshotStacks, userFrameRuleFromEnv } from "./block-stacks";
import type { BlockStacks, UserFrameRule } from "../profiler/user-frame";

export { MAX_SNAPSHOT_BYTES } from "./read";

/** A parsed snapshot as a replay source (its trace, annotations and final segments). */
export function replayOf(parsed: ParsedSnapshot): SnapshotReplay {
  return snapshotReplay(parsed.trace, parsed.root.external_annotations, parsed.root.segments, parsed.root.allocator_settings);
}

/** The model after the whole trace, fed as fast as it goes; `resync`: then the snapshot's segments
 *  taken in (what the screens show), not for the JSON, which tells the trace's own end. */
export function snapshotModel(parsed: ParsedSnapshot, opts: { keepTrace?: boolean; resync?: boolean; rule?: UserFrameRule } = {}): { model: ProfilerModel; replay: SnapshotReplay } {
  const replay = replayOf(parsed);
  // A snapshot is a replay: the blocks at the peak and end of every step it keeps (`[` `]`, `P`).
  const model = createModel().keepPeaks(MAX_STEPS);
  if (opts.keepTrace) model.keepTrace();
  replayToEnd(replay.source, { ranges: replay.ranges, model, segments: opts.resync ? (parsed.root.segments as unknown as SnapshotSegment[]) : null });
  // The trace's entries name no pool; the final segments do: the model is told which memory is a
  // private pool's (CUDA graphs, torch.cuda.MemPool), so that it is never counted as the default
  // pool's reserved but unallocated memory.
  const pools = privatePools(parsed.root);
  for (const d of model.devices) d.privatePools = pools.get(d.device) ?? [];
  // Where the blocks alive at the end were allocated: the findings name the user's line.
  model.stacks = blockStacksOf(parsed, opts.rule);
  return { model, replay };
}

/** What existed before the recording, per device, in numbers (blocks and segments counted). */
export function beforeSummary(replay: SnapshotReplay) {
  return replay.before.map((b) => ({
    device: b.device,
    blocks: b.blocks.length,
    allocated_bytes: b.allocated_bytes,
    active_bytes: b.active_bytes,
    segments: b.segments.length,
    reserved_bytes: b.reserved_bytes,
  }));
}

/** One line for a person: how much was there before the recording began. */
export function beforeNote(replay: SnapshotReplay, fmt: (bytes: number) => string): string | null {
  const parts = replay.before
    .filter((b) => b.blocks.length || b.segments.length)
    .map((b) => `device ${b.device}: ${fmt(b.allocated_bytes)} allocated in ${counted(b.blocks.length, "block")}, ${fmt(b.reserved_bytes)} reserved in ${counted(b.segments.length, "segment")}`);
  const note = parts.length ? `memory from before the recording began (in the snapshot's segments, not its trace): ${parts.join("; ")}` : null;
  // Block sizes the snapshot could not tell: said, never passed off as known.
  const unknown = replay.before
    .filter((b) => b.block_sizes.inferred > 0)
    .map((b) => `device ${b.device}: ${b.block_sizes.inferred} of ${counted(b.block_sizes.blocks, "block")}`);
  if (unknown.length === 0) return note;
  const sizes = `block sizes the snapshot does not show (${unknown.join("; ")}): each is counted as its request rounded to 512 bytes, and the allocator may have given it up to 1 MiB more`;
  return note ? `${note}. ${sizes}` : sizes;
}

/** What the screens say of a snapshot in their header: the file as it was named, its size, the
 *  span its trace recorded, and torch's totals at its end (its segments, every device's). */
export interface SnapshotFacts {
  file: string;
  bytes: number;
  /** The trace's entries, every device's (0: a snapshot taken without memory history). */
  entries: number;
  /** The trace's first and last time_us (µs since the epoch, as torch records them); null where
   *  its entries carry no time (then the screens' time is the entries' order). */
  first_time_us: number | null;
  last_time_us: number | null;
  devices: number;
  segments: number;
  allocated_bytes: number;
  reserved_bytes: number;
}

/** The header's facts of a parsed snapshot read from `file`, played into `model`: its span is the
 *  model's (the trace's entries and its annotations), the one the screens' charts cover. */
export function snapshotFacts(file: string, parsed: ParsedSnapshot, replay: SnapshotReplay, model: ProfilerModel): SnapshotFacts {
  const devices = new Set<number>();
  let allocated = 0;
  let reserved = 0;
  const segments = Array.isArray(parsed.root.segments) ? parsed.root.segments : [];
  const num = (v: unknown) => (typeof v === "number" ? v : 0);
  // As summary.ts counts them: a segment's size reserved, its active_allocated blocks allocated.
  for (const seg of segments as { [k: string]: unknown }[]) {
    devices.add(num(seg.device));
    reserved += num(seg.total_size);
    for (const b of Array.isArray(seg.blocks) ? (seg.blocks as { [k: string]: unknown }[]) : []) if (b.state === "active_allocated") allocated += num(b.size);
  }
  let first = Infinity;
  let last = -Infinity;
  for (const d of summary(model).devices) {
    if (d.first_time_us !== null) first = Math.min(first, d.first_time_us);
    if (d.last_time_us !== null) last = Math.max(last, d.last_time_us);
  }
  const timed = replay.time_source === "recorded" && first <= last;
  return { file, bytes: statSync(file).size, entries: parsed.trace.count, first_time_us: timed ? first : null, last_time_us: timed ? last : null, devices: Math.max(1, devices.size), segments: segments.length, allocated_bytes: allocated, reserved_bytes: reserved };
}

export interface SnapshotView extends SnapshotSummary {
  file: string;
  bytes: number;
  before_recording: ReturnType<typeof beforeSummary>;
  /** The trace played through the model from the memory before it: its end, its peak, its steps. */
  replay: {
    time_source: "recorded" | "order";
    devices: { device: number; allocated_bytes: number; active_bytes: number; reserved_bytes: number; peak_allocated_bytes: number; steps: number; block_sizes: BlockSizes | null }[];
  };
  categories: Categories[];
  findings: Finding[];
}

/** Where each block alive at the snapshot's end was allocated (its stack and user frame), for the
 *  screens; `rule`: what is library code (by default, as the environment says: block-stacks.ts). */
export function blockStacksOf(parsed: ParsedSnapshot, rule: UserFrameRule = userFrameRuleFromEnv()): BlockStacks {
  return snapshotStacks(parsed.root, parsed.trace.stacks, rule);
}

export async function viewJson(path: string, progress?: Progress, rule: UserFrameRule = userFrameRuleFromEnv()): Promise<SnapshotView> {
  const parsed = await readSnapshotFile(path, progress);
  // The trace kept as the screens keep it: the findings read it for the lines of a phase's callers
  // and of the blocks that left free ranges (phase-callers.ts, hole-lines.ts).
  const { model, replay } = snapshotModel(parsed, { rule, keepTrace: true });
  const s = summary(model);
  return {
    file: path,
    bytes: statSync(path).size,
    ...summarize(parsed, 10, rule, model.stacks ?? undefined),
    before_recording: beforeSummary(replay),
    replay: {
      time_source: replay.time_source,
      devices: s.devices.map((d) => ({
        device: d.device,
        allocated_bytes: d.allocated_bytes,
        active_bytes: d.active_bytes,
        reserved_bytes: d.reserved_bytes,
        peak_allocated_bytes: d.peak_allocated_bytes,
        // step boundaries seen (the model keeps the last 512 steps' detail, not all of them)
        steps: model.device(d.device)?.step ?? 0,
        // how the blocks' sizes are known: `inferred` ones may each be up to 1 MiB short
        block_sizes: replay.before.find((b) => b.device === d.device)?.block_sizes ?? null,
      })),
    },
    categories: model.devices.map((d) => categories(model, { device: d.device })),
    findings: findings(model),
  };
}
