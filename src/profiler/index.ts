// The profiler's public surface: a model fed with events, and pure queries over it.
export { createModel, ProfilerModel, resyncFromSnapshot, type NamedTensor, type SetHeaderOptions } from "./model";
export type { SnapshotSegment } from "./device";
export { summary, timeline, breakdown, steps, categories, blocks, deviceSummary } from "./queries";
export type { Summary, DeviceSummary, StepBreakdown, PhaseBreakdown, RangeBreakdown, StepLine, Categories, BlocksView, BlockLine } from "./queries";
export { segmentMap as segments, largestFreeBlock, type SegmentMap, type SegmentView } from "./segments";
export { findings, THRESHOLDS, type Finding, type FindingId } from "./findings";
export { TIMELINE_LEVELS, type TimelineView, type TimelineBucket } from "./timeline";
export { CATEGORIES, type CategoryName } from "./categories";
export { replay, batchSource, stateLine, finalLine, type EventSource, type ReplayClock, type ReplayOptions, type ReplayLine, type ReplayStateLine, type ReplayFinalLine } from "./replay";
export { snapshotTraceToBatch, type SnapshotLike, type SnapshotTraceEntry, type ConvertedTrace } from "./snapshot-trace";
