// Playback: a recording into a model at its recorded pace (or N times it), on a wall clock that
// stands still while paused and cuts a recording's idle stretches short; the demo's plays over
// again. The replay itself (what is fed when, which states) is the profiler's (profiler/replay.ts).
import { createModel, MAX_STEPS, replay, type ReplayClock } from "../profiler";
import { processNotes } from "../system/document";
import type { ProcessModel } from "./live";
import type { Recording } from "./recording";
import { recordFields } from "../system/manifest";

/** The wall clock, for a replay paced by it. */
export const wallClock: ReplayClock = {
  now_us: () => performance.now() * 1000,
  sleep: (us) => Bun.sleep(us / 1000),
};

/**
 * A wall clock for replays whose waits are cut to `maxWaitUs`; the time cut is added to what the
 * clock reads, so the schedule after a cut stays paced instead of rushing to catch up. A recording
 * that sat idle for seconds (model loading, a first step's warm-up) then plays on at its speed.
 */
export function idleCuttingClock(maxWaitUs: number, base: ReplayClock): ReplayClock {
  let cut = 0;
  return {
    now_us: () => base.now_us() + cut,
    sleep: (us) => {
      if (us > maxWaitUs) cut += us - maxWaitUs;
      return base.sleep(Math.min(us, maxWaitUs));
    },
  };
}

/**
 * A clock that stands still while paused: what it reads leaves out the time spent paused, so a
 * replay resumed goes on from the moment it stopped instead of rushing to catch up.
 */
export class PausableClock implements ReplayClock {
  private pausedAt: number | null = null;
  private pausedTotal = 0;
  private resumed: (() => void) | null = null;
  private wait: Promise<void> | null = null;
  constructor(private readonly base: ReplayClock) {}

  get paused(): boolean {
    return this.pausedAt !== null;
  }

  now_us(): number {
    return (this.pausedAt ?? this.base.now_us()) - this.pausedTotal;
  }

  sleep(us: number): Promise<void> {
    return this.base.sleep(us);
  }

  pause(on: boolean): void {
    if (on && this.pausedAt === null) {
      this.pausedAt = this.base.now_us();
      this.wait = new Promise((r) => (this.resumed = r));
    } else if (!on && this.pausedAt !== null) {
      this.pausedTotal += this.base.now_us() - this.pausedAt;
      this.pausedAt = null;
      this.resumed?.();
      this.wait = this.resumed = null;
    }
  }

  /** Resolves at once while running, on resume while paused. */
  untilRunning(): Promise<void> {
    return this.wait ?? Promise.resolve();
  }
}

export interface ReplayHandle {
  pm: ProcessModel;
  stop: () => void;
  /** Stops reading the recording into the model and the replay's clock; false resumes both. */
  pause: (on: boolean) => void;
}

/** Replays a recording into a model at `speed` times the recorded pace (looping for the demo). */
export function startReplay(recording: Recording, opts: { speed: number; onUpdate: () => void; loop?: () => Recording | null; maxIdleMs?: number; clock?: ReplayClock }): ReplayHandle {
  const pm: ProcessModel = { pid: recording.manifest?.pid ?? 0, model: createModel().keepTrace().keepPeaks(MAX_STEPS), source: "replay", socket: null, title: `replay of ${recording.path}`, command: recording.manifest?.cmdline.join(" ") || null, ended: false, names: null, notes: recording.manifest ? processNotes(recording.manifest) : undefined };
  let stopped = false;
  const wall = new PausableClock(opts.clock ?? wallClock);
  (async () => {
    let rec: Recording | null = recording;
    while (rec && !stopped) {
      // A loop's model takes the screens' place at its first state: until then they keep the last
      // loop's end (an empty model in between read as "no process with allocator events").
      const model = createModel().keepTrace().keepPeaks(MAX_STEPS);
      const clock = opts.maxIdleMs === undefined ? wall : idleCuttingClock(opts.maxIdleMs * 1000, wall);
      // The replay reads the recording only when asked for its next state: while paused it is not
      // asked, so no event reaches the model.
      for await (const _ of replay(rec.source, { speed: opts.speed, clock, ranges: rec.ranges, lines: rec.manifest?.lines, ...recordFields(rec.manifest), names: rec.names, stacks: rec.stacks, seed: rec.seed, model, state_every_us: 100_000 })) {
        if (stopped) return;
        if (pm.model !== model && model.devices.length > 0) pm.model = model;
        opts.onUpdate();
        await wall.untilRunning();
      }
      pm.ended = true;
      opts.onUpdate();
      try {
        rec = opts.loop ? opts.loop() : null;
      } catch (e) {
        // The recording gone or changed since (the demo's GPUMEM_TUI_DEMO file): the replay stays
        // on its end, says why, and nothing is raised into the monitor.
        pm.notes = { ...pm.notes, replay: `not played over: ${(e as Error).message}` };
        rec = null;
      }
      if (rec) {
        await wall.sleep(1_500_000); // a moment on the finished run before it starts over
        await wall.untilRunning();
        pm.ended = false;
      }
    }
  })();
  return { pm, stop: () => ((stopped = true), wall.pause(false)), pause: (on) => wall.pause(on) };
}
