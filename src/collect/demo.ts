// The demo: a training run recorded on a real GPU (demo/: its ring, manifest and names, and the
// NVML samples taken beside it), replayed at its own pace. The replay feeds a model as a live ring
// would; the recorded machine makes the Overview's document at the replay's moment, so a machine
// with no GPU shows the GPU the run was recorded on, its utilization and memory, and the process.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createModel, feed, FeedSource, processProfile, summary, type ProfilerModel } from "../profiler";
import { pytorchBlock } from "../system/document";
import { readSmallText } from "../snapshot/input-file";
import { MAX_TRACK_BYTES, parseTrack, sampleAt, trackDocument, type NvmlTrack } from "../system/recorded";
import type { Document, Pytorch } from "../system/schema";
import type { Manifest } from "../system/manifest";
import type { ProcessModel } from "./live";
import { startReplay, type ReplayHandle } from "./playback";
import { openRingRecording, type Recording } from "./recording";
import { HISTORY, type DeviceHistory } from "./session";
import { recordFields } from "../system/manifest";
import type { ReplayClock } from "../profiler";
import { ROOT } from "../root";
import { LedgerTrack } from "../profiler/ledger";

/** Where the demo lives in the package, and its recording's name. */
export const DEMO_DIR = join(ROOT, "demo");
export const DEMO_RING = join(DEMO_DIR, "demo.ring.gz");
export const DEMO_TRACK = join(DEMO_DIR, "demo.nvml.ndjson");
/** The recording the demo replays: a training run recorded on an H100 (demo/README.md);
 *  GPUMEM_TUI_DEMO names another (a new recording, checked before it replaces the shipped one). */
export const DEMO_RECORDING = process.env.GPUMEM_TUI_DEMO || DEMO_RING;

/** The NVML track beside a ring (`x.ring[.gz]` → `x.nvml.ndjson`), or null where there is none. A
 *  regular file of at most MAX_TRACK_BYTES: anything else is refused in words before it can block. */
export function readTrack(ringPath: string): NvmlTrack | null {
  const path = ringPath.replace(/\.ring(\.gz)?$/, ".nvml.ndjson");
  if (path === ringPath || !existsSync(path)) return null;
  return parseTrack(readSmallText(path, "recorded NVML track", MAX_TRACK_BYTES), path);
}

/** The replayed model's figures as the document's `pytorch` block has them, at the replay's moment. */
export function replayedPytorch(model: ProfilerModel, manifest: Manifest | null): Pytorch | null {
  const d = summary(model).devices[0];
  if (!d) return null;
  const figures = {
    hook_mode: manifest?.hook_mode === "polling" ? ("polling" as const) : ("hook" as const),
    device: d.device,
    allocated_bytes: d.allocated_bytes,
    reserved_bytes: d.reserved_bytes,
    active_bytes: d.active_bytes,
    peak_allocated_bytes: d.peak_allocated_bytes,
    peak_reserved_bytes: d.peak_reserved_bytes,
    alloc_count: d.n_alloc,
    oom_count: d.n_oom,
    alloc_retries: d.n_retries ?? 0,
    step: d.step,
    phase: d.phase,
  };
  return pytorchBlock(figures, manifest, null, null);
}

/** The replayed PyTorch figures at a track sample's moment, by the sample's index. */
export type FiguresAt = (index: number) => Pytorch | null;

/**
 * The replayed PyTorch figures at each NVML sample's recorded moment (the records before it fed,
 * as the replay feeds them), null before the first record. A document pairs a sample with these,
 * never with the replay's latest figures: NVML samples a second apart, and the allocator reserving
 * 17 GiB within one of them read as less memory on the GPU than PyTorch had reserved there.
 * `profiles`: each with the model's profile at that moment too (the documents of `--json --demo`;
 * the screens draw the live replay's).
 *
 * Computed as they are asked for, not before: the recording is opened at the first question and fed
 * only up to the sample asked (each kept, so a replay that starts over asks again for nothing), then
 * closed once the last sample has its figures. A demo's first frame waits for none of it (it was a
 * whole pass over the recording at the start, a third of `--demo`'s start), and a demo watched for a
 * few seconds feeds a few seconds of it. `onError`: told once, in words, where the recording cannot
 * be read again; the samples from there on have no PyTorch figures (NVML's stay).
 */
export function figuresAsked(ring: string, track: NvmlTrack, opts: { profiles?: boolean; onError?: (message: string) => void } = {}): FiguresAt {
  const known: (Pytorch | null)[] = [];
  let reading: { rec: Recording; model: ProfilerModel; from: FeedSource } | null = null;
  let failed = false;
  const close = () => {
    reading?.rec.close();
    reading = null;
  };
  return (index) => {
    if (index < known.length || failed) return known[index] ?? null;
    try {
      if (!reading) {
        const rec = openRingRecording(ring);
        const model = createModel();
        model.setRanges(rec.ranges);
        model.setRecordFields(recordFields(rec.manifest));
        model.setHeader(rec.source.header(), { totals: false });
        reading = { rec, model, from: new FeedSource(rec.source) };
      }
      const { rec, model, from } = reading;
      while (known.length <= index && known.length < track.samples.length) {
        feed(model, from, { time_us: track.samples[known.length]!.t_us });
        const pytorch = model.devices.length > 0 ? replayedPytorch(model, rec.manifest) : null;
        // A document's profile (its step, findings, categories) at the same moment as its figures.
        known.push(pytorch && opts.profiles ? { ...pytorch, profile: processProfile(model, { device: pytorch.device }) } : pytorch);
      }
    } catch (e) {
      failed = true;
      close();
      opts.onError?.(`the recording's figures at its NVML samples could not be read: ${(e as Error).message}`);
    }
    if (known.length >= track.samples.length) close();
    return known[index] ?? null;
  };
}

/** figuresAsked's figures at every sample at once: the recording played through its track. */
export function figuresAtSamples(ring: string, track: NvmlTrack, opts: { profiles?: boolean } = {}): (Pytorch | null)[] {
  const at = figuresAsked(ring, track, {
    ...opts,
    onError: (m) => {
      throw new Error(m);
    },
  });
  return track.samples.map((_, i) => at(i));
}

/** The replay's recorded moment: its model's latest event (null before the first). */
function replayTime(model: ProfilerModel): number | null {
  let t = -Infinity;
  for (const d of model.devices) if (d.lastTime_us > t) t = d.lastTime_us;
  return t === -Infinity ? null : t;
}

/**
 * The machine a recording was made on, as the Overview shows it: each tick, the track's sample in
 * force at the replay's moment, with the replay's PyTorch figures at that sample's moment in the
 * process row (figuresAtSamples: what NVML saw and what the allocator held, at one moment). The
 * GPU charts get one point per track sample passed; a replay that starts over goes on in them,
 * its clock running on from where the last loop ended (one history, as a live GPU's).
 */
export class RecordedMachine {
  readonly history = new Map<number, DeviceHistory>();
  private index = -1;
  /** What a loop adds to the track's clock: each loop's samples come after the last one's. */
  private loopOffsetUs = 0;
  doc: Document | null = null;
  /** What is outside PyTorch in the recorded process, from the track's samples (issue 40). */
  private ledger = new LedgerTrack();

  constructor(
    readonly track: NvmlTrack,
    private readonly pm: ProcessModel,
    /** The recording's figures at each track sample (figuresAsked, or figuresAtSamples' list). */
    figures: FiguresAt | readonly (Pytorch | null)[],
  ) {
    this.figures = typeof figures === "function" ? figures : (i) => figures[i] ?? null;
  }
  private readonly figures: FiguresAt;

  tick(): Document {
    const t = replayTime(this.pm.model);
    const index = t === null ? 0 : sampleAt(this.track, t);
    // A replay that starts over (the demo loops): its charts go on, a sample period after the last.
    if (index < this.index) {
      const s = this.track.samples;
      const period = s.length > 1 ? (s.at(-1)!.t_us - s[0]!.t_us) / (s.length - 1) : 1e6;
      this.loopOffsetUs += s[this.index]!.t_us - s[0]!.t_us + period;
      this.index = -1;
      this.ledger = new LedgerTrack();
    }
    for (let i = this.index + 1; i <= index; i++) {
      const sample = this.track.samples[i]!;
      for (const d of sample.devices) {
        let h = this.history.get(d.index);
        if (!h) this.history.set(d.index, (h = { util: [], memUsed: [], timesMs: [] }));
        h.util.push(d.gpu_utilization_percent ?? Number.NaN);
        h.memUsed.push(d.memory_used_bytes ?? Number.NaN);
        h.timesMs!.push((sample.t_us + this.loopOffsetUs) / 1000);
        if (h.util.length > HISTORY) h.util.shift(), h.memUsed.shift(), h.timesMs!.shift();
      }
      // The recorded process's ledger: each sample beside the replay's figures at its own moment
      // (beside the replay's latest, a second on, the first second read as an 18 GiB jump).
      const f = t === null ? null : this.figures(i);
      const used = sample.processes.find((p) => p.agent_pid === this.track.header.pid || p.pid === this.track.header.pid)?.used_bytes ?? null;
      if (f && used !== null) this.ledger.sample(sample.t_us, used, f.reserved_bytes, f.step ?? 0, `step ${f.step ?? 0}${f.phase ? ` (${f.phase})` : ""}`);
    }
    this.index = index;
    const pytorch = t === null ? null : this.figures(index);
    this.doc = trackDocument(this.track, index, pytorch, t === null ? null : this.ledger.parts());
    // The NVML figure of the recorded process, given to its replay as a live agent's is given its
    // own (collect/live.ts): the Process screen's NVML and non-PyTorch are the Overview row's.
    if (pytorch && t !== null) for (const p of this.doc.processes) if (p.pytorch && p.used_bytes !== null) this.pm.model.setNvml(p.pid, pytorch.device, p.used_bytes, t);
    return this.doc;
  }
}

/** "H100" of "NVIDIA H100 80GB HBM3": what the demo calls the GPU it was recorded on. */
export function shortGpu(name: string | undefined): string {
  return /\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b/.exec(name ?? "")?.[1] ?? "NVIDIA GPU";
}

/** The demo playing: its replay, the machine it was recorded on (null: no NVML track beside the
 *  ring) and that machine's GPU in a word. */
export interface Demo {
  handle: ReplayHandle;
  machine: RecordedMachine | null;
  gpu: string | null;
}

/** Starts the demo: `ring` replayed at `speed` times its pace and over again at its end, idle
 *  stretches (the model loading) cut to 2 s. Throws, in words, where it cannot be read. `clock`:
 *  the wall clock, unless a test gives its own. */
export function startDemo(ring: string, opts: { speed: number; onUpdate: () => void; clock?: ReplayClock; profiles?: boolean }): Demo {
  const rec = openRingRecording(ring);
  let track: NvmlTrack | null;
  try {
    track = readTrack(ring);
  } catch (e) {
    rec.close();
    throw e;
  }
  const handle = startReplay(rec, { speed: opts.speed, onUpdate: opts.onUpdate, loop: () => openRingRecording(ring), maxIdleMs: 2000, clock: opts.clock });
  handle.pm.title = `recording of ${rec.manifest?.cmdline.join(" ") ?? rec.path}`;
  // Told on the Process screen with the manifest's notes, where the figures' second read fails.
  const onError = (m: string) => (handle.pm.notes = { ...handle.pm.notes, demo: m });
  return { handle, machine: track ? new RecordedMachine(track, handle.pm, figuresAsked(ring, track, { profiles: opts.profiles, onError })) : null, gpu: track ? shortGpu(track.samples[0]?.devices[0]?.name) : null };
}
