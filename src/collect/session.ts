// The sampling session: one sample per tick for every front end (the screens, `--json`,
// `run --json`, `serve`): NVML, the agents (their directory scanned once), their rings into their
// models, short histories for the GPU charts, and each PyTorch process's profile in the document,
// so findings and names reach scripts as well as eyes, from the same functions.
import { buildDocument, nvmlUse } from "../system/document";
import type { Document } from "../system/schema";
import type { LiveModels } from "./live";
import type { Machine } from "./machine";

/** Samples kept per device for the GPU charts (10 minutes at the default 1-s interval). */
export const HISTORY = 600;

export interface DeviceHistory {
  util: number[];
  memUsed: number[];
  /** When each sample was taken (ms; a replay's own clock, running on across its loops): the
   *  charts' time axis. */
  timesMs?: number[];
}

export class Session {
  readonly history = new Map<number, DeviceHistory>();
  doc: Document | null = null;
  private live: LiveModels | null = null;

  /** `newModels`: the models of the agents' processes, called with the first agent (or the first
   *  read of `models`). The caller decides how they are made: the commands load the profiler only
   *  then (src/commands/live-models.ts), so a machine without agents does not pay for it. */
  constructor(
    readonly machine: Machine,
    private readonly newModels: () => LiveModels,
  ) {}

  get models(): LiveModels {
    return (this.live ??= this.newModels());
  }

  /** One sample, its document built once: the facts read, the models fed (their events, and
   *  NVML's used bytes beside them), then the document with what the models know. `oneShot`
   *  (`--json --once`): no rates are read, each ring is read once. `follow`: the agents whose rings
   *  are read (LiveModels.follow; absent: every one). */
  tick(now = Date.now(), opts: { oneShot?: boolean; follow?: ReadonlySet<number> | null } = {}): Document {
    const input = this.machine.read(now, opts);
    const agents = this.machine.lastAgents;
    if (agents.length > 0 || this.live) this.models.follow = opts.follow ?? null;
    // The document's time: a one-shot's is when the NVML warm-up took its sample, not `now`.
    if (agents.length > 0 || this.live) this.models.update(agents, nvmlUse(input), input.time_unix_ms * 1000, (a) => this.machine.agents.rereadManifest(a), (i, pid) => this.machine.usedNow(i, pid));
    const doc = buildDocument(input, this.live?.detail);
    for (const d of doc.devices) {
      let h = this.history.get(d.index);
      if (!h) this.history.set(d.index, (h = { util: [], memUsed: [], timesMs: [] }));
      h.util.push(d.gpu_utilization_percent ?? Number.NaN);
      h.memUsed.push(d.memory_used_bytes ?? Number.NaN);
      h.timesMs?.push(doc.time_unix_ms);
      if (h.util.length > HISTORY) h.util.shift(), h.memUsed.shift(), h.timesMs?.shift();
    }
    this.doc = doc;
    return doc;
  }

  close(opts: { fast?: boolean } = {}): void {
    this.machine.close(opts);
  }
}
