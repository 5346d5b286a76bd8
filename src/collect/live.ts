// Feeding the model: one ProfilerModel per agent process, fed from its ring at most once per
// tick (bounded work per tick, so keys and drawing never wait on a busy process), or from a
// recording for `replay` and `--demo`.
import { basename, dirname } from "node:path";
import { newEventBatch, type EventBatch } from "../ffi/events";
import { RingError, type RingReader } from "../ffi/ring";
import { createModel, MAX_SEED_BYTES, parseSeed, replay, type ProfilerModel, type ReplayClock } from "../profiler";
import { readSmallText } from "../snapshot/input-file";
import { processNotes } from "../system/document";
import type { Manifest } from "../system/manifest";
import type { Document } from "../system/schema";
import type { Agent } from "./agents";
import { type ExitNames, NameRequests } from "./names";
import type { Recording } from "./recording";

/** Events read per agent per tick at most: a lapped ring catches up over a few ticks. */
const MAX_EVENTS_PER_TICK = 1 << 20;

export interface ProcessModel {
  pid: number;
  model: ProfilerModel;
  /** "live" agents read their ring; "replay" models are fed by a recording. */
  source: "live" | "replay";
  socket: string | null;
  title: string;
  ended: boolean;
  /** Live agents: the names asked of the agent, and what they cost (null for replays). */
  names?: NameRequests | null;
  /** What the agent runs without, and why ({feature: sentence}: the manifest's notes, processNotes),
   *  and `ring` where the monitor stopped reading its ring. */
  notes?: Record<string, string>;
  /** Why this process's ring is no longer read (it was cut short, or its header went out of range,
   *  under the monitor); null while it is read. */
  ringStopped?: string | null;
  /** When `gpumem-tui attach` started the agent (the manifest's `attached`), null otherwise: an
   *  attach after a detach is a new agent, with a new ring, read into a new model. */
  attachedNs?: number | null;
}

/** An attached agent's seed (manifest `seed`), read once before its ring: the file must lie beside
 *  the ring, under the agent's name for it, and stay within MAX_SEED_BYTES. Null: no seed. */
export function seedOf(m: Manifest, model: ProfilerModel): void {
  if (!m.seed) return;
  try {
    if (dirname(m.seed.path) !== dirname(m.ring) || basename(m.seed.path) !== `${m.pid}.seed.json`)
      throw new Error(`${m.seed.path} is not beside the agent's ring`);
    model.setSeed(parseSeed(readSmallText(m.seed.path, "seed", MAX_SEED_BYTES), m.seed.path));
  } catch (e) {
    model.seedStatus = { state: "refused", reason: (e as Error).message, blocks: 0, bytes: 0, kept: 0 };
  }
}

export class LiveModels {
  readonly byPid = new Map<number, ProcessModel>();
  private readonly batch: EventBatch = newEventBatch(1 << 16);

  /** `keepTrace`: each model keeps its newest records, for the screens' phase bands and for `d`
   *  (a snapshot written from the monitor's own events). The headless front ends do neither, and
   *  copying every record costs a tenth of the session's time on a busy process. */
  constructor(private readonly opts: { keepTrace?: boolean } = { keepTrace: true }) {}

  private newModel(): ProfilerModel {
    const m = createModel();
    return this.opts.keepTrace ? m.keepTrace() : m;
  }

  /** Read new events of every agent and anchor totals to their headers and to NVML. `reread`: the
   *  agent's manifest read again, for a range the records met before the manifest named it. */
  update(agents: Agent[], doc: Document | null, nowUs: number, reread?: (a: Agent) => void): void {
    for (const a of agents) {
      let pm = this.byPid.get(a.pid);
      const attachedNs = a.manifest.attached?.unix_ns ?? null;
      if (!pm || (pm.attachedNs ?? null) !== attachedNs) {
        pm = { pid: a.pid, model: this.newModel(), source: "live", socket: a.manifest.socket, title: a.manifest.cmdline.join(" "), ended: false, names: new NameRequests(), attachedNs };
        this.byPid.set(a.pid, pm);
        seedOf(a.manifest, pm.model);
      }
      pm.model.setRanges(a.manifest.ranges);
      if (a.manifest.lines) pm.model.setLines(a.manifest.lines);
      pm.ended = a.exited;
      pm.notes = withRingStopped(processNotes(a.manifest), pm.ringStopped ?? null);
      // Names are asked of a running agent only; what came (a reply, the names at exit in the
      // final manifest) is applied after it exits too: the final document is named.
      const names = pm.names ?? null;
      if (names && a.manifest.final_names) names.exitNames(a.manifest.final_names as ExitNames);
      if (a.ring && !pm.ringStopped) {
        try {
          this.readRing(a, pm, a.ring, nowUs);
        } catch (e) {
          // A ring cut short (or its header gone out of range) under the monitor: this process's
          // reading stops for good, said once in its notes; every other process is read on.
          if (!(e instanceof RingError)) throw e;
          pm.ringStopped = e.kind === "truncated" ? RING_CUT : RING_OUT_OF_RANGE;
          pm.notes = withRingStopped(processNotes(a.manifest), pm.ringStopped);
        }
      }
      // Exited, its ring read to the end (or gone): what is left was taken before that end.
      if (names && a.exited) names.apply(pm.model, Infinity, nowUs / 1000);
      if (reread && pm.model.hasUnnamedRange()) {
        reread(a);
        pm.model.setRanges(a.manifest.ranges);
      }
      if (a.header) pm.model.setHeader(a.header);
      // This agent's rows (host pid may differ in a container), on the CUDA index of each row's GPU.
      for (const p of doc?.processes ?? []) {
        if (p.agent_pid === a.pid && p.used_bytes !== null && p.nvml_visible && p.pytorch) pm.model.setNvml(p.pid, p.pytorch.device, p.used_bytes, nowUs);
      }
    }
  }

  /** One agent's new records into its model (throws RingError where its ring became unreadable). */
  private readRing(a: Agent, pm: ProcessModel, ring: RingReader, nowUs: number): void {
    const names = pm.names ?? null;
    if (names?.late(ring.next()) && !a.exited) names.tick(pm.socket, pm.model, nowUs / 1000);
    // An exited agent's ring is read to its end now (no writer: at most one ring's records),
    // for the final document.
    const limit = a.exited ? Infinity : MAX_EVENTS_PER_TICK;
    let n = 0;
    while (n < limit) {
      // Names taken at a known stream position are applied between the records of their
      // moment: the read stops there (a folded batch does not map records onto positions).
      const at = names?.pendingAt() ?? null;
      const { count, lost } = ring.read(this.batch, at ?? Infinity);
      if (count > 0 || lost > 0) pm.model.ingest(this.batch, lost);
      n += count;
      if (at !== null && names!.apply(pm.model, ring.next(), nowUs / 1000)) continue;
      if (count === 0 && lost === 0) break;
    }
    if (names && !a.exited) {
      names.apply(pm.model, ring.next(), nowUs / 1000);
      names.tick(pm.socket, pm.model, nowUs / 1000);
    }
  }
}

/** The `ring` note of a process whose ring the monitor stopped reading. */
const RING_CUT = "the ring was cut short under the monitor: reading stopped";
const RING_OUT_OF_RANGE = "the ring's header went out of range under the monitor: reading stopped";

/** `notes` with the monitor's own word on the ring, after the agent's where it said one. */
function withRingStopped(notes: Record<string, string>, stopped: string | null): Record<string, string> {
  if (stopped === null) return notes;
  return { ...notes, ring: notes.ring ? `${notes.ring}; ${stopped}` : stopped };
}

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
  const pm: ProcessModel = { pid: recording.manifest?.pid ?? 0, model: createModel().keepTrace(), source: "replay", socket: null, title: `replay of ${recording.path}`, ended: false, names: null, notes: recording.manifest ? processNotes(recording.manifest) : undefined };
  let stopped = false;
  const wall = new PausableClock(opts.clock ?? { now_us: () => performance.now() * 1000, sleep: (us) => Bun.sleep(us / 1000) });
  (async () => {
    let rec: Recording | null = recording;
    while (rec && !stopped) {
      pm.model = createModel().keepTrace();
      const clock = opts.maxIdleMs === undefined ? wall : idleCuttingClock(opts.maxIdleMs * 1000, wall);
      // The replay reads the recording only when asked for its next state: while paused it is not
      // asked, so no event reaches the model.
      for await (const _ of replay(rec.source, { speed: opts.speed, clock, ranges: rec.ranges, names: rec.names, model: pm.model, state_every_us: 100_000 })) {
        if (stopped) return;
        opts.onUpdate();
        await wall.untilRunning();
      }
      pm.ended = true;
      opts.onUpdate();
      rec = opts.loop ? opts.loop() : null;
      if (rec) {
        await Bun.sleep(1500);
        await wall.untilRunning();
        pm.ended = false;
      }
    }
  })();
  return { pm, stop: () => ((stopped = true), wall.pause(false)), pause: (on) => wall.pause(on) };
}
