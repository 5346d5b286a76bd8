// The profiler's public surface: a model fed with events, and pure queries over it.
//
//   const m = createModel();                 // one process (one ring); devices inside
//   m.setRanges(manifest.ranges);            // range id → name
//   m.ingest(batch, lost);                   // columns from src/ffi (ring reader or converted snapshot)
//   m.setHeader(reader.header());            // exact totals win; after lost records they re-anchor
//   m.setNvml(pid, device, usedBytes, nowUs);
//   m.setNames(reply.tensors);               // the agent's `names` verb: names and categories
//   resyncFromSnapshot(m, snapshot.segments, nowUs);
//   m.setSeed(parseSeed(text));              // an attach's seed: blocks from before the attach
//
//   summary(m)                     totals per device, peaks, counts, NVML used, non-PyTorch bytes
//   timeline(m, {resolution_us})   min/max/last of allocated, reserved, NVML used per bucket
//   breakdown(m, {step})           per phase and range: allocated during, temporaries, held at end,
//                                  peak, share of the step's peak; the peak's composition in words
//   steps(m)                       one line per kept step
//   categories(m)                  live bytes by category
//   blocks(m, {limit, sort})       live blocks with phase, step, range, name, category
//   segments(m, {withBlocks})      segments with their blocks and free ranges
//   atPeak(m, {device, which, by}) the blocks alive at the running step's peak, a kept step's or the
//                                  run's, grouped by name, category, phase or range; they add up to it
//   unallocatedView(m, d)          reserved but unallocated memory now and at a step's peak, private pools apart
//   findings(m)                    OOM incidents, growth, gradients kept, reserved but unallocated memory that costs, …
//   feed(m, new FeedSource(source), until)  records into the model, up to a position, moment or count
//   replay(source, {speed, clock}) async NDJSON-ready states, the final one with the findings
//   replayToEnd(source, {segments}) the model at a recording's end (a snapshot's segments taken in)
//
// Every output is a plain JSON-able object: bytes as integers (`*_bytes`), times in µs (`*_us`),
// null for "not available".
export { createModel, ProfilerModel, type NamedTensor, type SetHeaderOptions } from "./model";
export { resyncFromSnapshot } from "./snapshot-resync";
export type { DeviceState, SnapshotSegment } from "./device";
// How the caching allocator rounds a request: what a snapshot's trace sizes become (src/snapshot).
export { blockSize } from "./blocks";
export { summary, timeline, categories, blocks, segments, deviceSummary, partialCauses, unnamedBytes, blockLabel } from "./queries";
export type { Summary, DeviceSummary, SyncSummary, Categories, BlocksView, BlockLine } from "./queries";
export type { SyncPoint } from "./consistency";
export { breakdown, steps, type StepBreakdown, type PhaseBreakdown, type RangeBreakdown, type StepLine } from "./breakdown";
export { segmentMap, largestFreeBlock, type SegmentMap, type SegmentView } from "./segment-map";
export { findings, distinctFindings, THRESHOLDS, type Finding, type FindingId, type FindingGroup } from "./findings";
export { unallocatedView, unallocatedLine, poolsLine, type UnallocatedView } from "./unallocated";
export type { PrivatePool, PoolId } from "./pools";
export { atPeak, peakBlockLines, peakSteps, segmentsAt, PEAK_WHICH, PEAK_GROUPINGS, type AtPeak, type PeakGroup, type PeakWhich, type PeakGrouping } from "./peak-groups";
export { PEAK_STEPS_KEPT } from "./at-peak";
export { MAX_STEPS } from "./step-accounting";
export { TIMELINE_LEVELS, type TimelineView, type TimelineBucket } from "./timeline";
export { CATEGORIES, type CategoryName } from "./categories";
export { feed, FeedSource, batchSource, type EventSource, type Until, type Fed } from "./feed";
export { replay, replayToEnd, stateLine, finalLine, type SavedNames, type ReplayClock, type ReplayOptions, type ReplayLine, type ReplayStateLine, type ReplayFinalLine } from "./replay";
export { phaseBands, oomColumns } from "./bands";
export { EventTail, DEFAULT_TRACE_ENTRIES } from "./tail";
export { processProfile } from "./profile";
export { segmentInside, type SegmentInside, type SegmentPart } from "./segment-inside";
export { parseSeed, MAX_SEED_BYTES, type Seed, type SeedStatus } from "./seed";
export { LineTable, type LineRow } from "./lines";
export { stepBands, timelineSteps, DEFAULT_BANDS, HELD_LISTED, type StepBands, type StepBand, type HeldBlock, type StepBandsOptions } from "./step-bands";
