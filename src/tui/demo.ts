// Starting the demo: a recording replayed at its pace, looping, with the machine it was recorded on.
import { startReplay } from "../collect/live";
import { openRingRecording, type Recording } from "../collect/recording";
import { readTrack, RecordedMachine } from "../collect/demo";
import type { Controller } from "./controller";
import { keyHint } from "./registry";
import type { ReplayClock } from "../profiler";

/** "H100" of "NVIDIA H100 80GB HBM3": what the status line calls the recorded GPU. */
export function shortGpu(name: string | undefined): string {
  return /\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b/.exec(name ?? "")?.[1] ?? "NVIDIA GPU";
}

/** The demo behind --demo and D: `ring` replayed at `speed` (looping), and the machine it was
 *  recorded on in the Overview where its NVML track is beside it. `clock`: the wall clock, unless a
 *  test gives its own. */
export function demoStarter(ctl: Controller, { speed, ring, clock }: { speed: number; ring: string; clock?: ReplayClock }) {
  let handle: ReturnType<typeof startReplay> | null = null;
  return {
    start: () => {
      if (handle) return ctl.say(`the demo is already running: ${keyHint(["process"])} shows it`);
      let rec: Recording;
      let track: ReturnType<typeof readTrack>;
      try {
        rec = openRingRecording(ring);
        track = readTrack(ring);
      } catch (e) {
        return ctl.say(`no demo: ${(e as Error).message}`);
      }
      // Idle stretches (the model loading) are cut to 2 s; the rest plays at the recorded pace.
      handle = startReplay(rec, { speed, onUpdate: () => ctl.notify(), loop: () => openRingRecording(ring), maxIdleMs: 2000, clock });
      ctl.replay = handle.pm;
      ctl.replays.add(handle);
      if (ctl.paused) handle.pause(true);
      ctl.replay.title = `recording of ${rec.manifest?.cmdline.join(" ") ?? rec.path}`;
      ctl.recorded = track ? new RecordedMachine(track, handle.pm, rec.manifest) : null;
      const gpu = track ? `an ${shortGpu(track.samples[0]?.devices[0]?.name)}` : "a GPU";
      ctl.say(`demo: a training run recorded on ${gpu}, replayed at ${speed}× (${keyHint(track ? ["overview", "process", "tensors", "segments"] : ["process", "tensors", "segments"])})`);
      ctl.tick();
    },
    stop: () => handle?.stop(),
  };
}

