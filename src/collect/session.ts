// The sampling session: one sample per tick for every front end (the screens, `--json`,
// `run --json`, `serve`): NVML, the agents (their directory scanned once), their rings into their
// models, short histories for the GPU charts, and each PyTorch process's profile in the document,
// so findings and names reach scripts as well as eyes, from the same functions.
import type { Document } from "../system/schema";
import type { LiveModels } from "./live";
import type { SystemCollector } from "./system";

/** Samples kept per device for the GPU charts (10 minutes at the default 1-s interval). */
export const HISTORY = 600;

export interface DeviceHistory {
  util: number[];
  memUsed: number[];
}

export class Session {
  readonly history = new Map<number, DeviceHistory>();
  doc: Document | null = null;
  private live: LiveModels | null = null;

  /** `keepTrace`: the models keep their newest records (the screens: phase bands and `d`). */
  constructor(
    readonly collector: SystemCollector,
    private readonly opts: { keepTrace?: boolean } = {},
  ) {}

  /** The models of the agents' processes. Loaded on first use: a machine with no agent (and
   *  `--json --once` there) pays nothing for the profiler. */
  get models(): LiveModels {
    return (this.live ??= new (require("./live") as typeof import("./live")).LiveModels({ keepTrace: this.opts.keepTrace ?? false }));
  }

  /** One sample. `oneShot` (`--json --once`): no rates are read, each ring is read once. */
  tick(now = Date.now(), opts: { oneShot?: boolean } = {}): Document {
    const doc = this.collector.sample(now, opts);
    const agents = this.collector.lastAgents;
    // The document's time: a one-shot's is when the NVML warm-up took its sample, not `now`.
    if (agents.length > 0 || this.live) this.models.update(agents, doc, doc.time_unix_ms * 1000, (a) => this.collector.agents.rereadManifest(a));
    for (const d of doc.devices) {
      let h = this.history.get(d.index);
      if (!h) this.history.set(d.index, (h = { util: [], memUsed: [] }));
      h.util.push(d.gpu_utilization_percent ?? Number.NaN);
      h.memUsed.push(d.memory_used_bytes ?? Number.NaN);
      if (h.util.length > HISTORY) h.util.shift(), h.memUsed.shift();
    }
    if (this.live) attachProfiles(doc, this.live);
    this.doc = doc;
    return doc;
  }

  close(opts: { fast?: boolean } = {}): void {
    this.collector.close(opts);
  }
}

/** Each PyTorch process's profile, from the model the session keeps of it (by its agent's pid). */
export function attachProfiles(doc: Document, models: LiveModels): void {
  const { processProfile } = require("../profiler") as typeof import("../profiler");
  for (const p of doc.processes) {
    if (!p.pytorch) continue;
    const pm = models.byPid.get(p.agent_pid ?? p.pid);
    p.pytorch.profile = pm ? processProfile(pm.model, { device: p.pytorch.device }) : null;
    // The model's notes: the manifest's (processNotes), and the monitor's own on the ring it read.
    if (pm?.notes) p.pytorch.notes = pm.notes;
  }
}
