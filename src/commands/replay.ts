// `gpumem-tui replay FILE`: a recording through the model: the screens, NDJSON states, or a snapshot.
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  const { openRecording } = await import("../collect/recording");
  const recording = await openRecording(opts.rest[0]!);
  try {
    if (opts.snapshot) {
      const { replaySnapshot } = await import("../headless/replay");
      await replaySnapshot(recording, opts.snapshot, { json: opts.json });
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
