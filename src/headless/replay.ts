// `replay FILE --json`: the model's states as NDJSON, the final state (with findings) last.
import type { Recording } from "../collect/recording";
import { replay, type ReplayClock } from "../profiler/replay";

const wallClock: ReplayClock = {
  now_us: () => performance.now() * 1000,
  sleep: (us) => Bun.sleep(us / 1000),
};

export async function replayJson(recording: Recording, opts: { speed?: number }): Promise<void> {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  const lines = replay(recording.source, { speed: opts.speed, clock: opts.speed ? wallClock : undefined, ranges: recording.ranges });
  for await (const line of lines) {
    if (!process.stdout.write(`${JSON.stringify(line)}\n`)) await new Promise((r) => process.stdout.once("drain", r));
  }
}
