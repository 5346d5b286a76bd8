// The sampling session: one sample per tick for every front end (the screens, `--json`,
// `run --json`, `serve`): NVML, the agents (their directory scanned once), their rings into their
// models, short histories for the GPU charts, and each PyTorch process's profile in the document,
// so findings and names reach scripts as well as eyes, from the same functions.
import { buildDocument, nvmlUse, type DetailOf } from "../system/document";
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

  /** One sample, its document built once: the facts read, the models fed (their events, and
   *  NVML's used bytes beside them), then the document with what the models know. `oneShot`
   *  (`--json --once`): no rates are read, each ring is read once. */
  tick(now = Date.now(), opts: { oneShot?: boolean } = {}): Document {
    const input = this.collector.read(now, opts);
    const agents = this.collector.lastAgents;
    // The document's time: a one-shot's is when the NVML warm-up took its sample, not `now`.
    if (agents.length > 0 || this.live) this.models.update(agents, nvmlUse(input), input.time_unix_ms * 1000, (a) => this.collector.agents.rereadManifest(a));
    const doc = buildDocument(input, this.live ? modelDetail(this.live) : undefined);
    for (const d of doc.devices) {
      let h = this.history.get(d.index);
      if (!h) this.history.set(d.index, (h = { util: [], memUsed: [] }));
      h.util.push(d.gpu_utilization_percent ?? Number.NaN);
      h.memUsed.push(d.memory_used_bytes ?? Number.NaN);
      if (h.util.length > HISTORY) h.util.shift(), h.memUsed.shift();
    }
    this.doc = doc;
    return doc;
  }

  close(opts: { fast?: boolean } = {}): void {
    this.collector.close(opts);
  }
}

/** What the model the session keeps of each agent's process (by its agent's pid) knows of it on a
 *  device: its profile, and its notes (the manifest's, and the monitor's own on the ring it read). */
function modelDetail(models: LiveModels): DetailOf {
  const { processProfile } = require("../profiler") as typeof import("../profiler");
  return (agentPid, cudaIndex) => {
    const pm = models.byPid.get(agentPid);
    return pm ? { profile: processProfile(pm.model, { device: cudaIndex }), notes: pm.notes } : null;
  };
}
