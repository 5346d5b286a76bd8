// A host running one 4-rank job (rank 3 missing) beside a process of its own, built from the
// training runs recorded on an H100 (test/fixtures/*.ring with their manifests): each rank is a
// recorded run, its manifest given a rank, world size and launcher as torchrun would.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseManifest, type Manifest, recordFields } from "../../src/system/manifest";
import type { ProcessInfo } from "../../src/system/process";
import { openRing } from "../../src/ffi/ring";
import type { NvmlDeviceSample } from "../../src/ffi/nvml";
import { buildDocument, type AgentView, type DetailOf } from "../../src/system/document";
import { openRingRecording } from "../../src/collect/recording";
import { processProfile, replayToEnd, type ProfilerModel } from "../../src/profiler";
import type { Document } from "../../src/system/schema";
import training from "../fixtures/h100-training.json";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
/** NVML used minus reserved of the recorded H100 process: its CUDA context and libraries. */
const CONTEXT_BYTES = 543_162_368;

export interface RankSpec {
  /** A fixture's name: `<name>.ring` and `<name>.json`. */
  fixture: string;
  rank: number | null;
  world_size: number | null;
  local_rank?: number | null;
  ppid: number | null;
  job?: string | null;
  /** torchrun's LOCAL_WORLD_SIZE and GROUP_RANK, where the launcher gives them. */
  local_world_size?: number | null;
  group_rank?: number | null;
  /** The NVML device it runs on. */
  device: number;
  command?: string;
  exited?: boolean;
  /** The ring as its agent left it at a clean exit (closed), whatever the recording's header says. */
  closed?: boolean;
  /** Listed by NVML (false: an agent NVML does not see). */
  nvml?: boolean;
  /** The agent's last heartbeat (the ring header's updated time, ms since the epoch), whatever the recording's says. */
  heard_unix_ms?: number;
}

export function agentOf(spec: RankSpec): AgentView {
  const path = join(FIXTURES, `${spec.fixture}.json`);
  const recorded = parseManifest(readFileSync(path, "utf8"), path);
  const manifest: Manifest = { ...recorded, rank: spec.rank, local_rank: spec.local_rank ?? spec.rank, world_size: spec.world_size, job: spec.job ?? null, local_world_size: spec.local_world_size ?? null, group_rank: spec.group_rank ?? null };
  const ring = openRing(join(FIXTURES, `${spec.fixture}.ring`));
  const header = ring.header();
  ring.close();
  return { pid: manifest.pid, manifest, header: { ...header, closed: spec.closed ?? header.closed, updated_unix_us: spec.heard_unix_ms === undefined ? header.updated_unix_us : spec.heard_unix_ms * 1000 }, exited: spec.exited ?? false };
}

/** The recorded H100's device, as NVML sampled it, at `index`. */
function deviceSample(index: number, processes: NvmlDeviceSample["processes"]): NvmlDeviceSample {
  const d = training.devices[0]!;
  const fields: Record<string, number | null> = {};
  for (const [k, v] of Object.entries(d)) if (typeof v === "number" || v === null) fields[k] = v as number | null;
  return { index, name: d.name, uuid: d.uuid.replace(/.$/, String(index)), pci_bus_id: d.pci_bus_id, fields, processes, process_api: null, error: null };
}

/** Each fixture's recording played through the model: its profile, as the monitor has it for a live rank. */
function profilesOf(specs: RankSpec[]): DetailOf {
  const models = new Map<number, ProfilerModel>();
  for (const s of specs) {
    const rec = openRingRecording(join(FIXTURES, `${s.fixture}.ring`));
    models.set(rec.manifest!.pid, replayToEnd(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest) }));
    rec.close();
  }
  return (pid, cuda) => {
    const m = models.get(pid);
    return m ? { profile: processProfile(m, { device: cuda }) } : null;
  };
}

/** The document of a host with these agents, `devices` GPUs and, on the last GPU, the recorded
 *  process without an agent; `profiles`: with the monitor's model of each rank (its step times). */
export function hostDocument(specs: RankSpec[], devices = 4, opts: { profiles?: boolean } = {}): Document {
  const agents = specs.map(agentOf);
  const info = new Map<number, ProcessInfo>();
  specs.forEach((s, i) => {
    const a = agents[i]!;
    info.set(a.pid, { user: "alice", name: "python3", command: s.command ?? "python3 train.py --epochs 3", uid: 1000, ppid: s.ppid });
  });
  const other = training.processes[0]!;
  info.set(other.pid, { user: other.user, name: other.name, command: other.command, uid: 0, ppid: 1 });
  const samples = Array.from({ length: devices }, (_, index) =>
    deviceSample(
      index,
      specs.flatMap((s, i) => (s.device === index && s.nvml !== false ? [{ pid: agents[i]!.pid, kind: "compute" as const, used_bytes: agents[i]!.header!.totals[0]!.reserved + CONTEXT_BYTES, sm_percent: null }] : [])),
    ),
  );
  samples[devices - 1]!.processes.push({ pid: other.pid, kind: "compute", used_bytes: other.used_bytes, sm_percent: null });
  return buildDocument({
    time_unix_ms: training.time_unix_ms,
    host: training.host,
    system: { driver_version: training.driver_version, nvml_version: training.nvml_version, cuda_driver_version: training.cuda_driver_version, device_count: devices },
    reason: null,
    samples,
    rateFrom: new Map(),
    processInfo: info,
    agents,
    warnings: [],
  }, opts.profiles ? profilesOf(specs) : undefined);
}

/** torchrun (pid 4700) with 4 ranks: 0 normal (20 steps), 1 no-zero-grad (12), 2 kept-loss-graph (12, the highest peak), 3 missing; and the oom run alone, with no rank. */
export const TORCHRUN: RankSpec[] = [
  { fixture: "kept-loss-graph", rank: 2, world_size: 4, ppid: 4700, device: 2 },
  { fixture: "normal", rank: 0, world_size: 4, ppid: 4700, device: 0 },
  { fixture: "oom", rank: null, world_size: null, ppid: 900, device: 3, command: "python3 notebook_kernel.py" },
  { fixture: "no-zero-grad", rank: 1, world_size: 4, ppid: 4700, device: 1 },
];
