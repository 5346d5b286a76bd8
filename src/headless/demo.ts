// `--json --demo`, `--json --once --demo` and `serve --demo`: the demo's recorded machine (the GPU
// the run was recorded on, its NVML samples, the process with its replayed PyTorch figures and the
// model's profile, both at the NVML sample's moment) as the document, so a jq pipeline or a Grafana dashboard can be tried on a
// machine with no GPU. The same replay and recorded machine as the screens' demo (collect/demo.ts).
import { openRingRecording } from "../collect/recording";
import { DEMO_RECORDING, figuresAtSamples, readTrack, RecordedMachine, startDemo, type Demo } from "../collect/demo";
import type { ProcessModel } from "../collect/live";
import { createModel, replayToEnd, type ReplayClock } from "../profiler";
import type { Document } from "../system/schema";
import { recordFields } from "../system/manifest";

const NO_TRACK = "has no recorded machine beside it (no .nvml.ndjson track): nothing to make a document of";

/** `--json --once --demo`: the recording played to its end as fast as it goes, and the recorded
 *  machine's document at that moment. */
export function demoDocument(ring = DEMO_RECORDING): Document {
  const rec = openRingRecording(ring);
  try {
    const track = readTrack(ring);
    if (!track) throw new Error(`the demo ${ring} ${NO_TRACK}`);
    const model = replayToEnd(rec.source, { ranges: rec.ranges, lines: rec.manifest?.lines, ...recordFields(rec.manifest), names: rec.names, model: createModel() });
    const pm: ProcessModel = { pid: rec.manifest?.pid ?? 0, model, source: "replay", socket: null, title: rec.path, ended: true };
    // Figures and profile at the last NVML sample's moment: one moment in one document.
    return new RecordedMachine(track, pm, figuresAtSamples(ring, track, { profiles: true })).tick();
  } finally {
    rec.close();
  }
}

/** `--json --demo` and `serve --demo`: the demo replaying at `speed` (and over again), each tick
 *  the recorded machine's document at the replay's moment. */
export class DemoSampler {
  private readonly demo: Demo;
  private readonly machine: RecordedMachine;

  /** `clock` and `onUpdate` (each replayed state): a test's, stepping through the recording. */
  constructor(opts: { speed: number; ring?: string; clock?: ReplayClock; onUpdate?: () => void }) {
    const ring = opts.ring ?? DEMO_RECORDING;
    this.demo = startDemo(ring, { speed: opts.speed, onUpdate: opts.onUpdate ?? (() => {}), clock: opts.clock, profiles: true });
    if (!this.demo.machine) {
      this.demo.handle.stop();
      throw new Error(`the demo ${ring} ${NO_TRACK}`);
    }
    this.machine = this.demo.machine;
  }

  tick(): Document {
    return this.machine.tick();
  }

  close(): void {
    this.demo.handle.stop();
  }
}
