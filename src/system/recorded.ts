// A recorded machine: the NVML samples taken beside a ring recording (the demo's "NVML track"), and
// the document they make at a moment of the replay. Pure: text in, documents out.
//
// The track is NDJSON. Its first line says what it is and where it was recorded:
//   {"format":"gpumem-tui nvml track","version":1,"host":…,"driver_version":…,"nvml_version":…,
//    "cuda_driver_version":…,"pid":<the recorded process, as its ring's manifest names it>}
// and every other line is one sample, at the ring's own clock (µs since the epoch, like its records):
//   {"t_us":…,"devices":[Device…],"processes":[Process…]}
// with devices and processes as the document has them (src/system/schema.ts), only the GPUs the
// recorded process used and only its own rows (the machine's other users are not shipped).
import { z } from "zod";
import { DeviceSchema, ProcessSchema, type Document, type Pytorch } from "./schema";
import { SCHEMA_VERSION } from "./version";
import { gpuLedger, ledgerRows, type Ledger, type LedgerParts } from "./ledger-rows";

export const TRACK_FORMAT = "gpumem-tui nvml track";

const TrackHeaderSchema = z.object({
  format: z.literal(TRACK_FORMAT),
  version: z.literal(1),
  host: z.string(),
  driver_version: z.string().nullable(),
  nvml_version: z.string().nullable(),
  cuda_driver_version: z.number().int().nullable(),
  pid: z.number().int().positive(),
});

const TrackSampleSchema = z.object({
  t_us: z.number(),
  devices: z.array(DeviceSchema),
  // A document's process rows, their `pytorch` left out (a zod object drops keys it does not name).
  processes: z.array(ProcessSchema.omit({ pytorch: true })),
});

export type TrackHeader = z.infer<typeof TrackHeaderSchema>;
export type TrackSample = z.infer<typeof TrackSampleSchema>;
export interface NvmlTrack {
  header: TrackHeader;
  /** In time order. */
  samples: TrackSample[];
}

/** Parse a track's text; a bad line is named with its number and what is wrong, in one line. */
export function parseTrack(text: string, path: string): NvmlTrack {
  const lines = text.split("\n").filter((l) => l.trim());
  if (lines.length === 0) throw new Error(`${path}: empty, not an NVML track`);
  const json = (l: string, n: number) => {
    try {
      return JSON.parse(l);
    } catch (e) {
      throw new Error(`${path}:${n}: not JSON (${(e as Error).message})`);
    }
  };
  const head = TrackHeaderSchema.safeParse(json(lines[0]!, 1));
  if (!head.success) throw new Error(`${path}:1: not an NVML track header (${issue(head.error)})`);
  const samples: TrackSample[] = [];
  for (let i = 1; i < lines.length; i++) {
    const s = TrackSampleSchema.safeParse(json(lines[i]!, i + 1));
    if (!s.success) throw new Error(`${path}:${i + 1}: not a track sample (${issue(s.error)})`);
    samples.push(s.data);
  }
  samples.sort((a, b) => a.t_us - b.t_us);
  if (samples.length === 0) throw new Error(`${path}: a header and no sample`);
  return { header: head.data, samples };
}

function issue(e: z.ZodError): string {
  const first = e.issues[0];
  return first ? `${first.path.join(".") || "line"}: ${first.message}` : "invalid";
}

/**
 * A track from the documents `gpumem-tui --json` wrote while a recording ran: the recorded process's
 * rows (its agent's pid, or its pid) and the GPUs they are on (`device` where it is on none yet),
 * one sample per `every_ms`, from `from_us` to `to_us` (the ring's clock: µs since the epoch).
 */
export function trackFromDocuments(docs: Document[], o: { pid: number; from_us: number; to_us: number; every_ms: number; device: number }): NvmlTrack {
  const samples: TrackSample[] = [];
  let lastMs = -Infinity;
  for (const d of docs) {
    const t = d.time_unix_ms * 1000;
    if (t < o.from_us || t > o.to_us || d.time_unix_ms - lastMs < o.every_ms * 0.9) continue;
    const rows = d.processes.filter((p) => p.agent_pid === o.pid || p.pid === o.pid);
    const gpus = new Set(rows.length ? rows.map((p) => p.device) : [o.device]);
    samples.push({ t_us: t, devices: d.devices.filter((x) => gpus.has(x.index)), processes: rows.map(({ pytorch: _, ...p }) => ({ ...p, agent_pid: o.pid })) });
    lastMs = d.time_unix_ms;
  }
  const d0 = docs[0];
  const header: TrackHeader = { format: TRACK_FORMAT, version: 1, host: d0?.host ?? "", driver_version: d0?.driver_version ?? null, nvml_version: d0?.nvml_version ?? null, cuda_driver_version: d0?.cuda_driver_version ?? null, pid: o.pid };
  return { header, samples };
}

/** The largest track read: a sample a second of a machine of eight GPUs is ~10 KB, so 64 MiB (the
 *  cap of every JSON read beside a recording) holds about two hours of one. */
export const MAX_TRACK_BYTES = 64 * 1024 ** 2;

/** A track as the NDJSON text parseTrack reads. */
export function trackText(track: NvmlTrack): string {
  return `${[track.header, ...track.samples].map((x) => JSON.stringify(x)).join("\n")}\n`;
}

/** The sample in force at recorded time `t_us`: the last one at or before it (the first before
 *  the track begins), as an index. */
export function sampleAt(track: NvmlTrack, t_us: number): number {
  let lo = 0;
  let hi = track.samples.length - 1;
  if (t_us < track.samples[0]!.t_us) return 0;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (track.samples[mid]!.t_us <= t_us) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * The document of the recorded machine at sample `index`: its GPUs (named as recorded) and the
 * recorded process's rows, whose PyTorch figures are the replay's at that moment (`pytorch`),
 * each GPU and row `recorded` (the screens mark them so).
 */
export function trackDocument(track: NvmlTrack, index: number, pytorch: Pytorch | null, parts: LedgerParts | null = null): Document {
  const s = track.samples[index]!;
  const h = track.header;
  return {
    version: SCHEMA_VERSION,
    time_unix_ms: Math.round(s.t_us / 1000),
    host: h.host,
    driver_version: h.driver_version,
    nvml_version: h.nvml_version,
    cuda_driver_version: h.cuda_driver_version,
    reason: null,
    // Each GPU's ledger from the recorded figures (the track's own processes only: no split by user).
    devices: s.devices.map((d) => ({ ...d, recorded: true, ledger: gpuLedger(d, s.processes.filter((p) => p.device === d.index && p.nvml_visible), null) })),
    processes: s.processes.map((p) => {
      // The recorded process opens the replay (Enter), which is named by its agent's pid.
      const own = p.agent_pid === h.pid || p.pid === h.pid;
      return {
        ...p,
        agent_pid: own ? h.pid : p.agent_pid,
        recorded: true,
        pytorch: pytorch && own ? { ...pytorch, non_pytorch_bytes: p.used_bytes === null ? null : p.used_bytes - pytorch.reserved_bytes, ...ledgerOf(p.used_bytes, pytorch, parts) } : null,
      };
    }),
    jobs: [],
    warnings: [],
  };
}

/** The recorded process's ledger at a sample (its NVML used, the replay's figures at that moment,
 *  `parts`: the track's attribution up to it); none without NVML's figure or an attribution. */
function ledgerOf(used: number | null, pytorch: Pytorch, parts: LedgerParts | null): { ledger?: Ledger } {
  if (used === null || parts === null) return {};
  const pools = pytorch.profile?.reserved_unallocated?.private_pools ?? [];
  return {
    ledger: ledgerRows({
      nvml_used_bytes: used,
      allocated_bytes: pytorch.allocated_bytes,
      reserved_bytes: pytorch.reserved_bytes,
      private_pools: pools.map((q) => ({ pool_id: [q.pool_id[0] ?? 0, q.pool_id[1] ?? 0] as const, reserved_bytes: q.reserved_bytes, allocated_bytes: q.allocated_bytes })),
      parts,
    }),
  };
}

/**
 * The machine's document with a recording's beside it (the demo on a machine with GPUs of its
 * own): the recording's devices come after the machine's, renumbered past them where their
 * indexes would collide, and its processes move with them. `index` maps a recorded device's
 * index to the one it has in the result (for its chart history).
 */
export function withRecorded(machine: Document | null, recorded: Document): { doc: Document; index: (recorded: number) => number } {
  if (!machine) return { doc: recorded, index: (i) => i };
  const taken = new Set(machine.devices.map((d) => d.index));
  let next = Math.max(-1, ...machine.devices.map((d) => d.index)) + 1;
  const renumber = new Map<number, number>();
  for (const d of recorded.devices) renumber.set(d.index, taken.has(d.index) ? next++ : d.index);
  const at = (i: number) => renumber.get(i) ?? i;
  const doc = {
    ...machine,
    devices: [...machine.devices, ...recorded.devices.map((d) => ({ ...d, index: at(d.index) }))],
    processes: [...machine.processes, ...recorded.processes.map((p) => ({ ...p, device: at(p.device) }))],
  };
  return { doc, index: at };
}
