// `replay FILE --json`: the model's states as NDJSON, the final state (with findings) last.
import type { Recording } from "../collect/recording";
import { wallClock } from "../collect/playback";
import { createModel, MAX_STEPS, replay, replayToEnd, type ReplayClock } from "../profiler";
import { MEMORY_VIZ, writeSnapshotFile, writtenSentence } from "../snapshot/write";
import { recordFields } from "../system/manifest";

/** `clock`: the wall clock, unless a test gives its own. */
export async function replayJson(recording: Recording, opts: { speed?: number; clock?: ReplayClock }): Promise<void> {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  for (const note of recording.notes) process.stderr.write(`gpumem-tui: ${note}\n`);
  const lines = replay(recording.source, { speed: opts.speed, clock: opts.speed ? (opts.clock ?? wallClock) : undefined, ranges: recording.ranges, lines: recording.manifest?.lines, ...recordFields(recording.manifest), names: recording.names, stacks: recording.stacks, seed: recording.seed });
  for await (const line of lines) {
    // A snapshot's final state says how much of it was there before the recording began.
    const out = line.type === "final" && recording.before ? { ...line, before_recording: recording.before } : line;
    if (!process.stdout.write(`${JSON.stringify(out)}\n`)) await new Promise((r) => process.stdout.once("drain", r));
  }
}

/**
 * `replay FILE --snapshot OUT`: the recording played to its end, as fast as it goes, then written
 * as a PyTorch memory snapshot (pytorch.org/memory_viz opens it), never over a file already at
 * `out` unless `force` (then only a regular file is replaced). Prints what was written: the
 * sentence `d` says (snapshot/write.ts), or with `json` its facts as one JSON object.
 */
export async function replaySnapshot(recording: Recording, out: string, opts: { json?: boolean; force?: boolean } = {}): Promise<void> {
  const model = replayToEnd(recording.source, { ranges: recording.ranges, lines: recording.manifest?.lines, ...recordFields(recording.manifest), names: recording.names, stacks: recording.stacks, seed: recording.seed, segments: recording.segments, model: createModel().keepTrace().keepPeaks(MAX_STEPS) });
  const f = writeSnapshotFile(model, out, { replace: opts.force });
  process.stdout.write(opts.json ? `${JSON.stringify(f)}\n` : `${writtenSentence(f, `snapshot of ${recording.path}`)}\n${MEMORY_VIZ}\n`);
}
