// From raw samples to the document every view shows (pure: inputs in, document out).
import type { RingHeader } from "../ffi/events";
import { PHASE_NAMES } from "../ffi/events";
import type { NvmlDeviceSample, NvmlSystem } from "../ffi/nvml";
import type { ProcessInfo } from "./process";
import type { Manifest } from "./manifest";
import { groupJobs } from "./jobs";
import { joinAgents, type JoinResult } from "./join";
import type { Device, Document, Process, Profile, Pytorch } from "./schema";
import { SCHEMA_VERSION } from "./version";
import { gpuLedger, ledgerRows, type Ledger, type LedgerParts } from "./ledger-rows";

export interface AgentView {
  pid: number;
  manifest: Manifest;
  header: RingHeader | null;
  exited: boolean;
}

export interface DocumentInput {
  time_unix_ms: number;
  host: string;
  system: NvmlSystem | null;
  reason: string | null;
  samples: NvmlDeviceSample[];
  /** Each device's sample (by index) its PCIe rate is measured from: the counters' read before
   *  this sample's (collect/dear-queries.ts); none where there is no rate yet. */
  rateFrom: Map<number, NvmlDeviceSample>;
  /** Who each process is (/proc), its parent pid included: the ranks of one launcher share it. */
  processInfo: Map<number, ProcessInfo>;
  agents: AgentView[];
  warnings: string[];
  /** The monitor's own user: the GPU ledger tells other users' processes apart (absent: no split). */
  user?: string | null;
  /** The monitor runs in a pid namespace of its own (a container): NVML lists only its processes
   *  (the GPU ledger's not_listed then holds every other one's memory). Absent: not. */
  containerView?: boolean;
  /** The agents joined to NVML's pids and devices (src/system/join.ts, with /proc's facts);
   *  absent, they are joined with none: every agent taken for the monitor's pid namespace. */
  join?: JoinResult;
}

/** Bytes per second between two cumulative counters; null where a counter is missing or wrapped. */
export function counterRate(
  prev: number | null | undefined,
  cur: number | null | undefined,
  prevUs: number | null | undefined,
  curUs: number | null | undefined,
): number | null {
  if (prev == null || cur == null || prevUs == null || curUs == null) return null;
  const dt = (curUs - prevUs) / 1e6;
  if (dt <= 0 || cur < prev) return null;
  return Math.round((cur - prev) / dt); // whole bytes per second: a counter has no fractions
}

function device(s: NvmlDeviceSample, prev: NvmlDeviceSample | undefined): Device {
  const f = s.fields;
  const pf = prev?.fields;
  return {
    index: s.index,
    name: s.name,
    uuid: s.uuid,
    pci_bus_id: s.pci_bus_id,
    memory_total_bytes: f.memory_total_bytes ?? null,
    memory_used_bytes: f.memory_used_bytes ?? null,
    memory_free_bytes: f.memory_free_bytes ?? null,
    memory_reserved_bytes: f.memory_reserved_bytes ?? null,
    gpu_utilization_percent: f.gpu_utilization_percent ?? null,
    memory_utilization_percent: f.memory_utilization_percent ?? null,
    encoder_utilization_percent: f.encoder_utilization_percent ?? null,
    decoder_utilization_percent: f.decoder_utilization_percent ?? null,
    temperature_celsius: f.temperature_celsius ?? null,
    power_draw_milliwatts: f.power_draw_milliwatts ?? null,
    power_limit_milliwatts: f.power_limit_milliwatts ?? null,
    fan_speed_percent: f.fan_speed_percent ?? null,
    sm_clock_mhz: f.sm_clock_mhz ?? null,
    sm_clock_max_mhz: f.sm_clock_max_mhz ?? null,
    memory_clock_mhz: f.memory_clock_mhz ?? null,
    memory_clock_max_mhz: f.memory_clock_max_mhz ?? null,
    graphics_clock_mhz: f.graphics_clock_mhz ?? null,
    pcie_rx_bytes_per_second: counterRate(pf?.pcie_rx_bytes_counter, f.pcie_rx_bytes_counter, pf?.pcie_counter_time_us, f.pcie_counter_time_us),
    pcie_tx_bytes_per_second: counterRate(pf?.pcie_tx_bytes_counter, f.pcie_tx_bytes_counter, pf?.pcie_counter_time_us, f.pcie_counter_time_us),
    performance_state: f.performance_state ?? null,
    error: s.error,
  };
}

/** What a process with the agent runs without, and why ({feature: sentence}): the manifest's notes,
 *  and under `hook` its `hook_error` (why the allocator hook is not used: no compiler, a hook cache
 *  others could write, polling asked for), said once: not where the notes say it already. The one
 *  place the JSON document and the screens take them from. */
export function processNotes(m: Pick<Manifest, "notes" | "hook_error">): Record<string, string> {
  const notes = m.notes ?? {};
  const hook = m.hook_error ?? null;
  if (hook === null || hook === "" || "hook" in notes || Object.values(notes).includes(hook)) return { ...notes };
  return { hook, ...notes };
}

/** What the allocator's totals say of one device: from a ring's header (a live process) or from a
 *  replayed model (the demo). */
export type AllocatorFigures = Pick<
  Pytorch,
  "hook_mode" | "device" | "allocated_bytes" | "reserved_bytes" | "active_bytes" | "peak_allocated_bytes" | "peak_reserved_bytes" | "alloc_count" | "oom_count" | "alloc_retries" | "step" | "phase"
>;

/** What the monitor's model of a process knows below the totals (src/collect/session.ts): its
 *  profile of a device, and its notes (the manifest's, and the monitor's own on the ring it read). */
export type ModelDetail = Pick<Pytorch, "profile"> & Partial<Pick<Pytorch, "notes">> & { ledger_parts?: LedgerParts | null };

/** The models' detail of an agent's process on one CUDA device (by the agent's pid); null where
 *  the monitor keeps no model of it. */
export type DetailOf = (agentPid: number, cudaIndex: number) => (ModelDetail & ForecastDetail) | null;

/** The room a forecast is made in: the device's total and what the process holds outside PyTorch. */
export interface ForecastRoomFigures {
  total_bytes: number | null;
  outside_bytes: number | null;
  /** Of outside_bytes, what other processes and the driver hold (null where not told apart). */
  others_bytes?: number | null;
}

/** The model's forecast in a room (src/profiler/forecast.ts forecastAt, bound by the caller that
 *  holds the model), with the growth finding's rate where one is made; null where it has none. */
export type ForecastDetail = { forecast?: ((room: ForecastRoomFigures, growthPerStep: number | null) => Pytorch["forecast"]) | null };

/** The document's `pytorch` block, the one place it is made: the allocator's figures, what the
 *  manifest says of the process, NVML's used bytes beside them, and the model's detail. */
export function pytorchBlock(
  header: AllocatorFigures,
  manifest: Manifest | null,
  nvmlUsed: number | null,
  detail: (ModelDetail & ForecastDetail) | null,
  device: ForecastDevice | null = null,
): Pytorch {
  // The model's totals where its blocks are torch's (profile.detail.totals_source): the header's
  // move by requested sizes between the agent's copies of torch's statistics.
  const own = detail?.profile?.detail.totals_source === "blocks" && detail.profile.device === header.device ? detail.profile.totals : undefined;
  const f = own ? { ...header, ...own } : header;
  return {
    hook_mode: f.hook_mode,
    device: f.device,
    allocated_bytes: f.allocated_bytes,
    reserved_bytes: f.reserved_bytes,
    active_bytes: f.active_bytes,
    peak_allocated_bytes: f.peak_allocated_bytes,
    peak_reserved_bytes: f.peak_reserved_bytes,
    non_pytorch_bytes: nvmlUsed === null ? null : nvmlUsed - f.reserved_bytes,
    alloc_count: f.alloc_count,
    oom_count: f.oom_count,
    alloc_retries: f.alloc_retries,
    step: f.step,
    phase: f.phase,
    rank: manifest?.rank ?? null,
    job: manifest?.job ?? null,
    torch_version: manifest?.torch_version ?? null,
    attached_unix_ns: manifest?.attached?.unix_ns ?? null,
    notes: detail?.notes ?? (manifest ? processNotes(manifest) : {}),
    profile: detail?.profile ?? null,
    forecast: forecastOf(f, nvmlUsed, detail, device),
    // Absent where NVML has no used bytes of the process: the documents of a machine without one
    // keep the shape they had.
    ...ledgerOf(f, nvmlUsed, detail),
  };
}

/** The ledger at this sample, from the figures the block shows beside it (so its rows sum to
 *  `nvmlUsed` with these very allocated and reserved bytes); none without NVML's used bytes. */
function ledgerOf(f: AllocatorFigures, nvmlUsed: number | null, detail: ModelDetail | null): { ledger?: Ledger } {
  if (nvmlUsed === null || detail === null) return {};
  const pools = detail.profile?.reserved_unallocated?.private_pools ?? [];
  const ledger = ledgerRows({
    nvml_used_bytes: nvmlUsed,
    allocated_bytes: f.allocated_bytes,
    reserved_bytes: f.reserved_bytes,
    private_pools: pools.map((p) => ({ pool_id: [p.pool_id[0] ?? 0, p.pool_id[1] ?? 0] as const, reserved_bytes: p.reserved_bytes, allocated_bytes: p.allocated_bytes })),
    parts: detail.ledger_parts ?? null,
  });
  return { ledger };
}

/** NVML's figures of the GPU a process's block is on, for its forecast's room. */
export interface ForecastDevice {
  total_bytes: number | null;
  free_bytes: number | null;
}

/** The forecast in the room NVML tells of, with the time to OOM where the growth finding is made;
 *  null before a settled step. Outside this allocator: everything on the GPU but its reserved
 *  (total − free − reserved: the process's CUDA context and libraries, other processes, the
 *  driver's), else the process's own NVML used − reserved. */
function forecastOf(f: AllocatorFigures, nvmlUsed: number | null, detail: ForecastDetail & ModelDetail | null, device: ForecastDevice | null): Pytorch["forecast"] {
  const at = detail?.forecast;
  if (!at) return null;
  return at(forecastRoom(f.reserved_bytes, nvmlUsed, device), growthPerStep(detail.profile ?? null));
}

/** The room of a process holding `reservedBytes` in its allocator, NVML's used bytes of it beside
 *  them, on a GPU with these figures (forecastOf's). */
function forecastRoom(reservedBytes: number, nvmlUsed: number | null, device: ForecastDevice | null): ForecastRoomFigures {
  const own = nvmlUsed === null ? null : nvmlUsed - reservedBytes;
  const total = device?.total_bytes ?? null;
  const free = device?.free_bytes ?? null;
  const all = total !== null && free !== null ? total - free - reservedBytes : null;
  return { total_bytes: total, outside_bytes: all ?? own, others_bytes: all !== null && own !== null ? Math.max(0, all - own) : null };
}

/** The growth finding's rate in a profile, where that finding is made (the forecast's time to OOM). */
export function growthPerStep(profile: Profile | null): number | null {
  const growth = profile?.findings.find((x) => x.id === "growth" && x.numbers.growth_per_step_bytes !== undefined)?.numbers.growth_per_step_bytes;
  return typeof growth === "number" ? growth : null;
}

/** The room a document's process row gives its forecast, as buildDocument made it there: NVML's
 *  figures of the GPU and of the process where NVML lists it; none where it does not (a row of an
 *  agent NVML does not list). A view that reads the forecast where the document carries none (the
 *  screens' documents: collect/live.ts) makes it in this room. */
export function rowForecastRoom(doc: Pick<Document, "devices">, row: Process): ForecastRoomFigures | null {
  if (!row.pytorch) return null;
  if (!row.nvml_visible) return forecastRoom(row.pytorch.reserved_bytes, null, null);
  const d = doc.devices.find((x) => x.index === row.device);
  return forecastRoom(row.pytorch.reserved_bytes, row.used_bytes, { total_bytes: d?.memory_total_bytes ?? null, free_bytes: d?.memory_free_bytes ?? null });
}

/** The ring header's figures of CUDA device `cudaIndex` (the ring's totals are per CUDA index, as
 *  the process numbers its devices); null where the header counts no such device. */
function headerFigures(agent: AgentView, cudaIndex: number): AllocatorFigures | null {
  const h = agent.header;
  const t = h?.totals.find((x) => x.device === cudaIndex);
  if (!h || !t) return null;
  return {
    hook_mode: h.mode,
    device: cudaIndex,
    allocated_bytes: t.allocated,
    reserved_bytes: t.reserved,
    active_bytes: t.active,
    peak_allocated_bytes: t.peak_allocated,
    peak_reserved_bytes: t.peak_reserved,
    alloc_count: t.n_alloc,
    oom_count: t.n_oom,
    alloc_retries: t.n_retries,
    step: h.current_step,
    phase: PHASE_NAMES[h.current_phase] ?? "other",
  };
}

/** An agent process's row on an NVML device: its NVML used bytes on the CUDA index of that device. */
export interface NvmlUse {
  agentPid: number;
  /** The host's pid, as NVML lists it. */
  pid: number;
  cudaIndex: number;
  /** NVML's index of the device (the ledger's sample at a mark asks NVML of this one). */
  nvmlIndex: number;
  used_bytes: number;
}

/** Each process NVML lists on each device, joined to its agent and the CUDA index of that device
 *  where it has one (src/system/join.ts). */
function* listedRows(input: DocumentInput, join: JoinResult, agents: Map<number, AgentView>) {
  for (const s of input.samples) {
    for (const p of s.processes) {
      const agentPid = join.byHostPid.get(p.pid);
      const agent = agentPid === undefined ? undefined : agents.get(agentPid);
      const cuda = agent ? join.agents.get(agent.pid)?.nvmlToCuda.get(s.index) : undefined;
      yield { s, p, agent, figures: agent && cuda !== undefined ? headerFigures(agent, cuda) : null };
    }
  }
}

/** NVML's used bytes of each agent process on each GPU its ring counts: what the models take
 *  beside their events (non-PyTorch memory), from the same rows the document shows. */
export function nvmlUse(input: DocumentInput): NvmlUse[] {
  const out: NvmlUse[] = [];
  for (const { s, p, agent, figures } of listedRows(input, joinOf(input), new Map(input.agents.map((a) => [a.pid, a])))) {
    if (agent && figures && p.used_bytes !== null) out.push({ agentPid: agent.pid, pid: p.pid, cudaIndex: figures.device, nvmlIndex: s.index, used_bytes: p.used_bytes });
  }
  return out;
}

function joinOf(input: DocumentInput): JoinResult {
  return input.join ?? joinAgents({ devices: input.samples, agents: input.agents, procs: new Map(), ownPidNamespace: null });
}

/** What /proc says of a process's use of the host: CPU %, resident memory, run time (to the
 *  millisecond: /proc counts in clock ticks, and uptime − start time in floating point reads
 *  22.569999999999993). */
function hostFigures(info: ProcessInfo | undefined): Pick<Process, "cpu_percent" | "host_memory_bytes" | "run_time_seconds"> {
  const run = info?.run_time_seconds;
  return { cpu_percent: info?.cpu_percent ?? null, host_memory_bytes: info?.host_memory_bytes ?? null, run_time_seconds: run == null ? null : toMs(run) };
}

/** Seconds to the millisecond: a measurement's own precision, without floating point's tail. */
export function toMs(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}

/** The CUDA indexes an agent NVML does not list is on: those its ring counts reserved memory of,
 *  else its one device, else torch's default device. */
function unlistedDevices(agent: AgentView): number[] {
  const used = (agent.header?.totals ?? []).filter((t) => t.reserved > 0).map((t) => t.device);
  if (used.length) return used;
  return [agent.manifest.devices.length === 1 ? agent.manifest.devices[0]! : 0];
}

/** The document of one sample, in one pass. `detail`: what the monitor's models know of the agents'
 *  processes (their profiles and notes); absent, none is known (`profile` null). */
export function buildDocument(input: DocumentInput, detail?: DetailOf): Document {
  const agents = new Map(input.agents.map((a) => [a.pid, a]));
  const join = joinOf(input);
  const pytorch = (agent: AgentView, f: AllocatorFigures | null, used: number | null, device: ForecastDevice | null = null) =>
    f ? pytorchBlock(f, agent.manifest, used, detail?.(agent.pid, f.device) ?? null, device) : null;
  /** The host pid of an agent where known; /proc's facts are the host pid's (never another's). */
  const hostPid = (a: AgentView) => join.agents.get(a.pid)?.hostPid ?? null;
  const infoOf = (a: AgentView) => {
    const h = hostPid(a);
    return h === null ? undefined : input.processInfo.get(h);
  };
  const processes: Process[] = [];
  // Every process once per device NVML lists it on; an agent's figures are those of the CUDA index
  // that is that device.
  for (const { s, p, agent, figures } of listedRows(input, join, agents)) {
    const info = input.processInfo.get(p.pid);
    processes.push({
      pid: p.pid,
      agent_pid: agent?.pid ?? null,
      pid_namespace: agent?.manifest.pid_namespace ?? null,
      device: s.index,
      kind: p.kind,
      used_bytes: p.used_bytes,
      user: info?.user ?? null,
      name: info?.name ?? null,
      command: info?.command ?? null,
      pytorch: agent ? pytorch(agent, figures, p.used_bytes, { total_bytes: s.fields.memory_total_bytes ?? null, free_bytes: s.fields.memory_free_bytes ?? null }) : null,
      gpu_sm_percent: p.sm_percent ?? null,
      ...hostFigures(info),
      nvml_visible: true,
      exited: false,
    });
  }
  // Agents NVML does not list (or that could not be joined): shown, with no NVML memory, and said
  // so (never joined by guess), on the devices their rings count memory on.
  const listed = new Set(processes.flatMap((p) => (p.agent_pid === null ? [] : [p.agent_pid])));
  for (const agent of input.agents) {
    if (listed.has(agent.pid) || !agent.header) continue;
    const info = infoOf(agent);
    const j = join.agents.get(agent.pid);
    for (const cuda of unlistedDevices(agent)) {
      processes.push({
        pid: hostPid(agent) ?? agent.pid,
        agent_pid: agent.pid,
        pid_namespace: agent.manifest.pid_namespace ?? null,
        device: j?.cudaToNvml.get(cuda) ?? cuda,
        kind: "compute",
        used_bytes: null,
        user: info?.user ?? null,
        name: info?.name ?? null,
        command: info?.command ?? (agent.manifest.cmdline.join(" ") || null),
        pytorch: pytorch(agent, headerFigures(agent, cuda), null),
        gpu_sm_percent: null,
        ...hostFigures(agent.exited ? undefined : info),
        nvml_visible: false,
        exited: agent.exited,
      });
    }
  }
  const jobs = groupJobs(
    processes,
    input.agents.map((a) => {
      const info = infoOf(a);
      return {
        pid: hostPid(a) ?? a.pid,
        ppid: info?.ppid ?? null,
        rank: a.manifest.rank,
        local_rank: a.manifest.local_rank,
        world_size: a.manifest.world_size,
        job: a.manifest.job ?? null,
        local_world_size: a.manifest.local_world_size ?? null,
        group_rank: a.manifest.group_rank ?? null,
        command: info?.command ?? (a.manifest.cmdline.join(" ") || null),
        exited: a.exited,
        detached: a.header?.closed ?? false,
        last_heard_unix_ms: a.header?.updated_unix_us ? a.header.updated_unix_us / 1000 : null,
      };
    }),
  );
  return {
    version: SCHEMA_VERSION,
    time_unix_ms: input.time_unix_ms,
    host: input.host,
    driver_version: input.system?.driver_version ?? null,
    nvml_version: input.system?.nvml_version ?? null,
    cuda_driver_version: input.system?.cuda_driver_version ?? null,
    reason: input.reason,
    devices: input.samples.map((s) => {
      const d = device(s, input.rateFrom.get(s.index));
      return { ...d, ledger: gpuLedger(d, processes.filter((p) => p.device === s.index && p.nvml_visible), input.user ?? null, input.containerView ?? false) };
    }),
    processes,
    jobs,
    warnings: [...input.warnings, ...join.warnings],
  };
}
