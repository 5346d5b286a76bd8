// `gpumem-tui replay FILE`: a recording through the model: the screens, NDJSON states, or a snapshot.
import { lstatSync } from "node:fs";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  // A file already at OUT is said before a long replay, not after it (the write checks again).
  if (opts.snapshot && !opts.force) refuseTaken(opts.snapshot);
  const { openRecording } = await import("../collect/recording");
  const recording = await openRecording(opts.rest[0]!);
  try {
    if (opts.snapshot) {
      const { replaySnapshot } = await import("../headless/replay");
      await replaySnapshot(recording, opts.snapshot, { json: opts.json, force: opts.force });
      return 0;
    }
    if (!opts.json) {
      const { runReplay } = await loadScreens();
      return await runReplay(recording, opts);
    }
    const { replayJson } = await import("../headless/replay");
    await replayJson(recording, { speed: opts.speed });
    return 0;
  } finally {
    recording.close();
  }
}

/** `replay --snapshot OUT` without --force: anything at OUT (a file, a link, even a dangling one) is kept. */
function refuseTaken(out: string): void {
  if (lstatSync(out, { throwIfNoEntry: false })) throw new Error(`cannot write the snapshot to ${out}: a file of that name is already there (--force replaces it)`);
}
