// A recorded ring replayed with NVML's per-process used bytes fed at their recorded moments (the
// monitor's documents of the same run, or the program's own pynvml samples): the ledger at each
// sample, as the live monitor makes it (the model's track, the document's rows from its figures).
import { readFileSync } from "node:fs";
import { openRingBuffer } from "../../src/ffi/ring";
import { createModel, feed, FeedSource, processProfile, summary, type ProfilerModel } from "../../src/profiler";
import { ledgerRows, type Ledger } from "../../src/profiler/ledger";
import { parseManifest, recordFields } from "../../src/system/manifest";

export interface NvmlSample {
  time_us: number;
  used_bytes: number;
  /** torch's figures the live monitor read from the ring header at that tick (the document's), where
   *  the replay needs them: an attach's seed (the blocks from before it) is not in the recording, and
   *  the header's exact totals stand for them as they do live where a seed is missing or refused. */
  header?: { allocated_bytes: number; reserved_bytes: number; active_bytes: number };
}

export interface LedgerAt {
  time_us: number;
  ledger: Ledger;
  allocated: number;
  reserved: number;
}

/** `ring` (.ring or .ring.gz) with its manifest, fed up to each sample's moment, then the sample.
 *  `readWindow_us`: how long after a document's time its NVML read may have come (the tick reads
 *  the agents' headers, then NVML): as the live monitor does (src/collect/same-moment.ts), the
 *  sample is given torch's reserved as of its time (the header read before NVML) and said to be of
 *  one moment only where the reserved at the window's end (a second model, fed that far: the header
 *  read after NVML) is the same. 0: every sample is taken as of its time. */
export function replayLedger(ring: string, manifest: string, samples: NvmlSample[], device = 0, opts: { readWindow_us?: number } = {}): { model: ProfilerModel; at: LedgerAt[] } {
  const window = opts.readWindow_us ?? 0;
  const m = parseManifest(readFileSync(manifest, "utf8"), manifest);
  const bytes = readFileSync(ring);
  const ringBytes = ring.endsWith(".gz") ? Bun.gunzipSync(bytes) : bytes;
  const open = () => {
    const reader = openRingBuffer(ringBytes, ring, { fold: true });
    const model = createModel();
    model.setRanges(m.ranges);
    model.setRecordFields(recordFields(m));
    // As the live monitor does for an attached agent (collect/live.ts).
    if (m.attached) model.ledger.setAttached();
    return { reader, model, src: new FeedSource(reader) };
  };
  const { reader, model, src } = open();
  const ahead = window > 0 ? open() : null;
  const reservedOf = (x: ProfilerModel) => summary(x).devices.find((d) => d.device === device)?.reserved_bytes ?? 0;
  const at: LedgerAt[] = [];
  for (const s of [...samples].sort((a, b) => a.time_us - b.time_us)) {
    feed(model, src, { time_us: s.time_us });
    if (ahead) feed(ahead.model, ahead.src, { time_us: s.time_us + window });
    if (s.header) {
      const t = { ...reader.header().totals.find((x) => x.device === device)!, device, allocated: s.header.allocated_bytes, reserved: s.header.reserved_bytes, active: s.header.active_bytes };
      model.setHeader({ ...reader.header(), totals: [t] }, { totals: true });
    }
    model.setNvml(m.pid, device, s.used_bytes, s.time_us, ahead === null || reservedOf(ahead.model) === reservedOf(model));
    const d = summary(model).devices.find((x) => x.device === device);
    if (!d) continue;
    const pools = processProfile(model, { device })?.reserved_unallocated?.private_pools ?? [];
    const ledger = ledgerRows({
      nvml_used_bytes: s.used_bytes,
      allocated_bytes: d.allocated_bytes,
      reserved_bytes: d.reserved_bytes,
      private_pools: pools.map((p) => ({ pool_id: [p.pool_id[0]!, p.pool_id[1]!] as const, reserved_bytes: p.reserved_bytes, allocated_bytes: p.allocated_bytes })),
      parts: model.ledger.parts(device),
    });
    at.push({ time_us: s.time_us, ledger, allocated: d.allocated_bytes, reserved: d.reserved_bytes });
  }
  reader.close();
  ahead?.reader.close();
  return { model, at };
}

/** The NVML samples of process `pid` in a `run --json` recording (NDJSON, gzip'd or not); `header`:
 *  with torch's figures the document gave beside each (NvmlSample.header). */
export function documentSamples(path: string, pid: number, opts: { header?: boolean } = {}): NvmlSample[] {
  const bytes = readFileSync(path);
  const text = path.endsWith(".gz") ? new TextDecoder().decode(Bun.gunzipSync(bytes)) : bytes.toString("utf8");
  const out: NvmlSample[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    type Torch = { allocated_bytes: number; reserved_bytes: number; active_bytes: number };
    const doc = JSON.parse(line) as { time_unix_ms: number; processes: Array<{ pid: number; agent_pid: number | null; used_bytes: number | null; pytorch?: Torch | null }> };
    for (const p of doc.processes) {
      if ((p.pid !== pid && p.agent_pid !== pid) || p.used_bytes === null) continue;
      const t = p.pytorch;
      const header = opts.header && t ? { allocated_bytes: t.allocated_bytes, reserved_bytes: t.reserved_bytes, active_bytes: t.active_bytes } : undefined;
      out.push({ time_us: doc.time_unix_ms * 1000, used_bytes: p.used_bytes, ...(header ? { header } : {}) });
    }
  }
  return out;
}

/** The program's own samples (test/gpu/ledger_prog.py's facts): NVML used at known moments. */
export function factSamples(facts: { samples: Array<{ t_unix_ns: number; nvml_used: number | null }> }): NvmlSample[] {
  return facts.samples.filter((s) => s.nvml_used !== null).map((s) => ({ time_us: s.t_unix_ns / 1000, used_bytes: s.nvml_used! }));
}
