// The live models: one ProfilerModel per agent process, fed from its ring at most once per tick
// (bounded work per tick, so keys and drawing never wait on a busy process). A recording plays
// into a ProcessModel of its own (playback.ts).
import { basename, dirname } from "node:path";
import { newEventBatch, type EventBatch } from "../ffi/events";
import { RingError, type RingReader } from "../ffi/ring";
import { createModel, feed, FeedSource, findings, processProfile, type Finding, type ProfilerModel } from "../profiler";
import { readSeedFile } from "./seed-file";
import { forecastAt, forecastBasis, type ForecastBasis } from "../profiler/forecast";
import { processNotes, type DetailOf, type NvmlUse } from "../system/document";
import { recordFields, type Manifest } from "../system/manifest";
import type { Agent } from "./agents";
import { type ExitNames, NameRequests } from "./name-requests";
import { hasStacks, ManifestStacks, withSeedStacks } from "./manifest-stacks";
import { headerNow, reservedStill } from "./same-moment";
import type { SnapshotFacts } from "../snapshot/view";

/** Events read per agent per tick at most: a lapped ring catches up over a few ticks. */
const MAX_EVENTS_PER_TICK = 1 << 20;

export interface ProcessModel {
  pid: number;
  model: ProfilerModel;
  /** "live" agents read their ring; "replay" models are fed by a recording. */
  source: "live" | "replay";
  socket: string | null;
  title: string;
  /** A replay's command line, as its recording's manifest has it (the Overview's COMMAND). */
  command?: string | null;
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
  /** Live agents: the model's findings as this tick left it (every device's), computed once at the
   *  end of the tick's update for the document and the screens alike; undefined for replays. */
  found?: Finding[];
  /** The ledger's marks met at its last sample at a mark, and when that was (ms): sampleAtMarks. */
  ledgerMarks?: number;
  ledgerSampleMs?: number;
  /** Live agents: its ring was left unread this tick, the screens following other processes
   *  (LiveModels.follow): its figures are its ring header's, its model as it was. */
  unread?: boolean;
  /** `view FILE`: the snapshot this model was played from (the screens show a file, not a process). */
  snapshot?: SnapshotFacts | null;
}

/** An attached agent's seed (manifest `seed`), read once before its ring: the file must lie beside
 *  the ring, under the agent's name for it, and stay within MAX_SEED_BYTES. Null: no seed. */
export function seedOf(m: Manifest, model: ProfilerModel): void {
  if (!m.seed) return;
  try {
    if (dirname(m.seed.path) !== dirname(m.ring) || basename(m.seed.path) !== `${m.pid}.seed.json`)
      throw new Error(`${m.seed.path} is not beside the agent's ring`);
    const seed = readSeedFile(m.seed.path);
    model.setSeed(seed);
    // torch's frames of the blocks from before the attach, where its memory history was on
    model.stacks = withSeedStacks(model.stacks, seed);
  } catch (e) {
    model.seedStatus = { state: "refused", reason: (e as Error).message, blocks: 0, bytes: 0, kept: 0 };
  }
}

/** The forecast of a basis in the room the document knows (null: no basis). */
const forecastIn = (b: ForecastBasis | null) => b && ((room: Parameters<typeof forecastAt>[1], growth: number | null) => forecastAt(b, room, growth));

export class LiveModels {
  readonly byPid = new Map<number, ProcessModel>();
  /** 8,192 records: the batch's columns (~550 KB) stay in the core's cache between the native read
   *  that writes them and the ingest that reads them. At 65,536 (4.4 MB) both went to memory: four
   *  writers at 165k records/s read 50-72 ns a record against 41-61 (bench/results/ring-read). */
  private readonly batch: EventBatch = newEventBatch(8192);

  /** `keepTrace`: each model keeps its newest records, for the screens' phase bands and for `d`
   *  (a snapshot written from the monitor's own events). The headless front ends do neither, and
   *  copying every record costs a tenth of the session's time on a busy process. `screens`: the
   *  document's profiles leave out what no screen reads from the document (processProfile). */
  constructor(private readonly opts: { keepTrace?: boolean; screens?: boolean } = { keepTrace: true }) {}

  /** What the model of each agent's process (by its agent's pid) knows of it on a device: its
   *  profile, and its notes (the manifest's, and the monitor's own on the ring it read). */
  /** The agents (by pid) whose rings `update` reads; null: every one. The screens of many busy
   *  processes read only the one they show in detail (src/tui/controller.ts); the headless front
   *  ends read every ring. */
  follow: ReadonlySet<number> | null = null;

  readonly detail: DetailOf = (agentPid, cudaIndex) => {
    const pm = this.byPid.get(agentPid);
    // A ring left unread: no profile of a model that stopped where its reading did; the document
    // gives the header's figures, and the notes say why.
    if (pm?.unread) return { profile: null, notes: pm.notes };
    return pm ? { forecast: this.opts.screens ? null : forecastIn(forecastBasis(pm.model, cudaIndex)), profile: processProfile(pm.model, { device: cudaIndex, found: pm.found, screens: this.opts.screens }), notes: pm.notes, ledger_parts: pm.model.ledger.parts(cudaIndex) } : null;
  };

  private newModel(): ProfilerModel {
    const m = createModel();
    return this.opts.keepTrace ? m.keepTrace() : m;
  }

  /** Read new events of every agent and anchor totals to their headers and to NVML (`nvml`: its
   *  used bytes of the agents' processes, nvmlUse; null: none). `reread`: the agent's manifest read
   *  again, for a range the records met before the manifest named it. */
  update(agents: Agent[], nvml: readonly NvmlUse[] | null, nowUs: number, reread?: (a: Agent) => void, usedNow?: UsedNow): void {
    for (const a of agents) {
      let pm = this.byPid.get(a.pid);
      const attachedNs = a.manifest.attached?.unix_ns ?? null;
      if (!pm || (pm.attachedNs ?? null) !== attachedNs) {
        pm = { pid: a.pid, model: this.newModel(), source: "live", socket: a.manifest.socket, title: a.manifest.cmdline.join(" "), ended: false, names: new NameRequests(), attachedNs };
        this.byPid.set(a.pid, pm);
        seedOf(a.manifest, pm.model);
        if (attachedNs !== null) pm.model.ledger.setAttached();
      }
      pm.model.setRanges(a.manifest.ranges);
      pm.model.setRecordFields(recordFields(a.manifest));
      if (hasStacks(a.manifest)) pm.model.stacks = ((pm.model.stacks as ManifestStacks | null) ?? new ManifestStacks()).update(a.manifest.stacks, a.manifest);
      if (a.manifest.lines) pm.model.setLines(a.manifest.lines);
      pm.ended = a.exited;
      // An exited agent's ring is read to its end whoever is followed: the final document needs it.
      const unread = this.follow !== null && !this.follow.has(a.pid) && !a.exited && !!a.ring;
      pm.unread = unread;
      pm.notes = withRingStopped(processNotes(a.manifest), pm.ringStopped ?? (unread ? RING_UNREAD : null));
      // Names are asked of a running agent only; what came (a reply, the names at exit in the
      // final manifest) is applied after it exits too: the final document is named.
      const names = pm.names ?? null;
      if (names && a.manifest.final_names) names.exitNames(a.manifest.final_names as ExitNames);
      if (a.ring && !pm.ringStopped && !unread) {
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
      // This agent's rows (host pid may differ in a container), on the CUDA index of each row's GPU;
      // the header read again now, after NVML, says whether torch's reserved stood still across it.
      const after = nvml?.some((u) => u.agentPid === a.pid) ? headerNow(a) : null;
      for (const u of nvml ?? []) if (u.agentPid === a.pid) pm.model.setNvml(u.pid, u.cudaIndex, u.used_bytes, nowUs, reservedStill(a.header, after, u.cudaIndex));
      if (usedNow) sampleAtMarks(pm, a, nvml ?? [], usedNow);
      // Unread, its model says nothing new: no findings are made of it (the frame says so).
      pm.found = unread ? [] : findings(pm.model);
    }
  }

  /** One agent's new records into its model (throws RingError where its ring became unreadable). */
  private readRing(a: Agent, pm: ProcessModel, ring: RingReader, nowUs: number): void {
    const names = pm.names ?? null;
    if (names?.late(ring.next()) && !a.exited) names.askIfDue(pm.socket, pm.model, nowUs / 1000);
    // An exited agent's ring is read to its end now (no writer: at most one ring's records),
    // for the final document.
    const limit = a.exited ? Infinity : MAX_EVENTS_PER_TICK;
    // Every process's feed shares one batch: a live feed never stops at a moment, so no record is
    // left in it for the next. A model that keeps a trace is read into it in place.
    const from = new FeedSource(ring, this.batch, pm.model.tail);
    let n = 0;
    for (;;) {
      // Names taken at a known stream position are applied between the records of their
      // moment: the feed stops there (a folded batch does not map records onto positions).
      const at = names?.pendingAt() ?? null;
      n += feed(pm.model, from, { position: at ?? Infinity, records: limit - n }).records;
      if (at === null || !names!.apply(pm.model, ring.next(), nowUs / 1000)) break;
    }
    if (names && !a.exited) {
      names.apply(pm.model, ring.next(), nowUs / 1000);
      names.askIfDue(pm.socket, pm.model, nowUs / 1000);
    }
  }
}

/** NVML's used bytes of a host pid on an NVML device now (Machine.usedNow), null where not listed. */
export type UsedNow = (nvmlIndex: number, pid: number) => number | null;

/** Samples at library marks, per process at most this often: 10 a second. */
const MARK_SAMPLE_MS = 100;

/** Library marks came with this tick's records (NCCL's communicator made, a graph instantiated):
 *  NVML's used bytes of the process read again now, after them, so the ledger ties the change to
 *  its mark rather than to whatever the next tick's sample also holds. At most 10 a second. */
function sampleAtMarks(pm: ProcessModel, a: Agent, nvml: readonly NvmlUse[], usedNow: UsedNow): void {
  const seen = pm.model.ledger.marksSeen;
  if (seen === (pm.ledgerMarks ?? 0)) return;
  const now = Date.now();
  if (now - (pm.ledgerSampleMs ?? 0) < MARK_SAMPLE_MS) return; // the next tick's sample takes them
  pm.ledgerMarks = seen;
  pm.ledgerSampleMs = now;
  for (const u of nvml) {
    if (u.agentPid !== pm.pid) continue;
    const used = usedNow(u.nvmlIndex, u.pid);
    // The model's reserved is the tick's header's (read before this NVML read): one moment only
    // where a header read after it has the same.
    if (used !== null) pm.model.setNvml(u.pid, u.cudaIndex, used, now * 1000, reservedStill(a.header, headerNow(a), u.cudaIndex));
  }
}

/** The `ring` note of a process whose ring the monitor stopped reading. */
const RING_CUT = "the ring was cut short under the monitor: reading stopped";
const RING_OUT_OF_RANGE = "the ring's header went out of range under the monitor: reading stopped";
/** The `ring` note of a process whose ring the screens leave unread (LiveModels.follow). */
export const RING_UNREAD = "not read while the screens follow other processes: its figures are the ring header's (exact at each of the allocator's syncs), no findings; shown, it is read again (what it wrote meanwhile as far as the ring still holds it, the rest counted lost)";

/** `notes` with the monitor's own word on the ring, after the agent's where it said one. */
function withRingStopped(notes: Record<string, string>, stopped: string | null): Record<string, string> {
  if (stopped === null) return notes;
  return { ...notes, ring: notes.ring ? `${notes.ring}; ${stopped}` : stopped };
}
