// Joining agents to NVML (pure: facts in, joins out; the collector reads /proc and NVML).
//
// Two joins. Pids: NVML reports host pids; an agent names itself by its pid in its own pid
// namespace, which is the host's only when it runs in the monitor's namespace. An agent in
// another one (a container) is joined to the NVML process whose innermost NSpid is the agent's pid
// and whose pid namespace is the agent's; where that is not one process, it is said, not guessed.
// Devices: an agent counts memory per CUDA index as its process sees it (CUDA_VISIBLE_DEVICES
// renumbers them); NVML counts per NVML index. They are joined by device UUID, else by the
// process's only NVML device, else by CUDA_VISIBLE_DEVICES, else index for index.
import type { Manifest } from "./manifest";
import type { PidNsInfo } from "./process";

/** NVML's view of one device: enough to join on (an NvmlDeviceSample is one). */
export interface JoinDevice {
  index: number;
  uuid: string;
  processes: { pid: number }[];
}

export interface JoinAgent {
  /** The agent's pid (its manifest's): in its own pid namespace. */
  pid: number;
  manifest: Pick<Manifest, "devices"> & Partial<Pick<Manifest, "device_uuids" | "cuda_visible_devices" | "pid_namespace" | "host_pid">>;
  /** The host pid an earlier join found: kept while NVML no longer lists the process (it exited). */
  hostPid?: number | null;
  /** An agent whose process has exited is joined still, but not warned about. */
  exited?: boolean;
}

export interface JoinInput {
  devices: JoinDevice[];
  agents: JoinAgent[];
  /** /proc's facts of host pids (those NVML lists, at least); a pid missing here is unknown. */
  procs: Map<number, PidNsInfo>;
  /** The monitor's own pid namespace; null where unreadable (every agent is then taken for the
   *  monitor's namespace, as agents that do not report theirs are). */
  ownPidNamespace: number | null;
}

/** How a CUDA index was joined to an NVML index. */
export type DeviceJoin = "uuid" | "nvml_single" | "cuda_visible_devices" | "identity";

export interface AgentJoin {
  agentPid: number;
  /** The pid NVML knows the process by: the agent's own in the monitor's pid namespace; in
   *  another, the one the join found, null where none was found (then a warning says why). */
  hostPid: number | null;
  /** The agent runs in another pid namespace than the monitor (its pid is not the host's). */
  otherNamespace: boolean;
  /** CUDA index (the process's) → NVML index, and back, for every index that was joined. */
  cudaToNvml: Map<number, number>;
  nvmlToCuda: Map<number, number>;
  /** How each CUDA index was joined. */
  how: Map<number, DeviceJoin>;
}

export interface JoinResult {
  /** By agent pid. */
  agents: Map<number, AgentJoin>;
  /** Host pid → agent pid, for every agent joined to a host pid. */
  byHostPid: Map<number, number>;
  /** What could not be joined, in words, for the document's warnings. */
  warnings: string[];
}

/**
 * CUDA_VISIBLE_DEVICES as CUDA reads it: entry i is CUDA index i, an NVML index (CUDA's
 * enumeration matches NVML's where CUDA_DEVICE_ORDER=PCI_BUS_ID or the GPUs are all alike) or a
 * UUID or its prefix ("GPU-…"); CUDA stops at the first entry it cannot read. null where unset.
 */
export function parseCudaVisibleDevices(value: string | null | undefined): (number | string)[] | null {
  if (value == null) return null;
  const out: (number | string)[] = [];
  for (const raw of value.split(",")) {
    const e = raw.trim();
    if (/^\d+$/.test(e)) out.push(Number(e));
    else if (/^(GPU|MIG)-[0-9a-f-]+$/i.test(e)) out.push(e.toLowerCase());
    else break;
  }
  return out;
}

function byUuid(devices: JoinDevice[], uuid: string, prefix: boolean): number | null {
  const u = uuid.toLowerCase();
  const found = devices.filter((d) => (prefix ? d.uuid.toLowerCase().startsWith(u) : d.uuid.toLowerCase() === u));
  return found.length === 1 ? found[0]!.index : null;
}

/**
 * The NVML index of each of the agent's CUDA indexes. `listedOn`: the NVML indexes NVML lists the
 * process on (empty where it lists it nowhere). An NVML index is given to one CUDA index at most.
 */
export function mapDevices(agent: JoinAgent, devices: JoinDevice[], listedOn: number[] = []): Pick<AgentJoin, "cudaToNvml" | "nvmlToCuda" | "how"> {
  const m = agent.manifest;
  const cuda = m.devices.length ? m.devices : [0];
  const visible = parseCudaVisibleDevices(m.cuda_visible_devices);
  const indexes = new Set(devices.map((d) => d.index));
  const cudaToNvml = new Map<number, number>();
  const nvmlToCuda = new Map<number, number>();
  const how = new Map<number, DeviceJoin>();
  const ways: [DeviceJoin, (c: number, pos: number) => number | null][] = [
    ["uuid", (_c, pos) => (m.device_uuids?.[pos] ? byUuid(devices, m.device_uuids[pos]!, false) : null)],
    ["nvml_single", () => (cuda.length === 1 && listedOn.length === 1 ? listedOn[0]! : null)],
    [
      "cuda_visible_devices",
      (c) => {
        const e = visible?.[c];
        if (typeof e === "number") return indexes.has(e) ? e : null;
        return e === undefined ? null : byUuid(devices, e, true);
      },
    ],
    ["identity", (c) => (visible === null && indexes.has(c) ? c : null)],
  ];
  // Way by way, so that a weaker way never takes an NVML index a stronger one gives another.
  for (const [name, way] of ways) {
    cuda.forEach((c, pos) => {
      if (cudaToNvml.has(c)) return;
      const n = way(c, pos);
      if (n === null || nvmlToCuda.has(n)) return;
      cudaToNvml.set(c, n);
      nvmlToCuda.set(n, c);
      how.set(c, name);
    });
  }
  return { cudaToNvml, nvmlToCuda, how };
}

/** Both pids of one process: the innermost NSpid is `nsPid` and the namespace is `ns`. */
function matches(info: PidNsInfo | undefined, nsPid: number, ns: number): "yes" | "maybe" | "no" {
  if (!info?.nspid || info.nspid.length < 2 || info.nspid[info.nspid.length - 1] !== nsPid) return "no";
  if (info.pid_namespace === null) return "maybe";
  return info.pid_namespace === ns ? "yes" : "no";
}

function hostPidOf(a: JoinAgent, nvmlPids: number[], input: JoinInput, said: string[]): number | null {
  const warnings = a.exited ? [] : said;
  const ns = a.manifest.pid_namespace!;
  const sure = nvmlPids.filter((p) => matches(input.procs.get(p), a.pid, ns) === "yes");
  const maybe = nvmlPids.filter((p) => matches(input.procs.get(p), a.pid, ns) === "maybe");
  const who = `agent of pid ${a.pid} (pid namespace ${ns})`;
  if (sure.length === 1) return sure[0]!;
  if (sure.length > 1) {
    warnings.push(`${who}: NVML lists pids ${sure.join(", ")}, each with that pid in that namespace: not joined`);
    return null;
  }
  // Found before and not contradicted now: NVML stopped listing it (it exited, or let go of the GPU).
  const known = a.hostPid ?? a.manifest.host_pid ?? null;
  if (known !== null && (!input.procs.has(known) || matches(input.procs.get(known), a.pid, ns) !== "no")) return known;
  if (maybe.length) {
    const pids = maybe.join(", ");
    warnings.push(`${who}: NVML ${maybe.length > 1 ? `pids ${pids} each have` : `pid ${pids} has`} that pid in some namespace, but their pid namespaces cannot be read: not joined`);
  } else {
    warnings.push(`${who}: runs in another pid namespace and no process NVML lists is it; its NVML memory is not shown`);
  }
  return null;
}

/** Join every agent to its host pid and its CUDA indexes to NVML's. */
export function joinAgents(input: JoinInput): JoinResult {
  const warnings: string[] = [];
  const nvmlPids = [...new Set(input.devices.flatMap((d) => d.processes.map((p) => p.pid)))];
  const agents = new Map<number, AgentJoin>();
  const byHostPid = new Map<number, number>();
  for (const a of input.agents) {
    const ns = a.manifest.pid_namespace ?? null;
    const otherNamespace = ns !== null && input.ownPidNamespace !== null && ns !== input.ownPidNamespace;
    let hostPid = otherNamespace ? hostPidOf(a, nvmlPids, input, warnings) : a.pid;
    if (hostPid !== null && byHostPid.has(hostPid)) {
      warnings.push(`agents of pids ${byHostPid.get(hostPid)} and ${a.pid} both join host pid ${hostPid}: the second is not joined`);
      hostPid = null;
    }
    if (hostPid !== null) byHostPid.set(hostPid, a.pid);
    const listedOn = hostPid === null ? [] : input.devices.filter((d) => d.processes.some((p) => p.pid === hostPid)).map((d) => d.index);
    agents.set(a.pid, { agentPid: a.pid, hostPid, otherNamespace, ...mapDevices(a, input.devices, listedOn) });
  }
  return { agents, byHostPid, warnings };
}
