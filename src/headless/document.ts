// From raw samples to the document every view shows (pure: inputs in, document out).
import type { RingHeader } from "../ffi/events";
import { PHASES } from "../ffi/events";
import type { NvmlDeviceSample, NvmlSystem } from "../ffi/nvml";
import type { ProcessInfo } from "../collect/procfs";
import type { Manifest } from "../collect/manifest";
import { groupJobs } from "../collect/jobs";
import type { Device, Document, Process, Pytorch } from "./schema";
import { SCHEMA_VERSION } from "./version";

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
  /** The previous sample of each device (by index), for rates. */
  previous: Map<number, NvmlDeviceSample>;
  /** Who each process is (/proc), its parent pid included: the ranks of one launcher share it. */
  processInfo: Map<number, ProcessInfo>;
  agents: AgentView[];
  warnings: string[];
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
  return (cur - prev) / dt;
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

/** The agent's view of one device of its process, beside NVML's. */
export function pytorchView(agent: AgentView, deviceIndex: number, nvmlUsed: number | null): Pytorch | null {
  const h = agent.header;
  if (!h) return null;
  // The ring's totals are per CUDA device index as the process sees it; with one device visible
  // (the usual launcher set-up) that is totals[0] whatever NVML's index.
  const local = agent.manifest.devices.length === 1 ? 0 : deviceIndex;
  const t = h.totals[local] ?? h.totals.find((x) => x.reserved > 0) ?? null;
  if (!t) return null;
  return {
    hook_mode: h.mode,
    device: local,
    allocated_bytes: t.allocated,
    reserved_bytes: t.reserved,
    active_bytes: t.active,
    peak_allocated_bytes: t.peak_allocated,
    peak_reserved_bytes: t.peak_reserved,
    non_pytorch_bytes: nvmlUsed === null ? null : nvmlUsed - t.reserved,
    alloc_count: t.n_alloc,
    oom_count: t.n_oom,
    alloc_retries: t.n_retries,
    step: h.current_step,
    phase: PHASES[h.current_phase] ?? "other",
    rank: agent.manifest.rank,
    job: agent.manifest.job ?? null,
    torch_version: agent.manifest.torch_version,
  };
}

export function buildDocument(input: DocumentInput): Document {
  const agents = new Map(input.agents.map((a) => [a.pid, a]));
  const processes: Process[] = [];
  for (const s of input.samples) {
    for (const p of s.processes) {
      const info = input.processInfo.get(p.pid);
      const agent = agents.get(p.pid);
      processes.push({
        pid: p.pid,
        device: s.index,
        kind: p.kind,
        used_bytes: p.used_bytes,
        user: info?.user ?? null,
        name: info?.name ?? null,
        command: info?.command ?? null,
        pytorch: agent ? pytorchView(agent, s.index, p.used_bytes) : null,
        nvml_visible: true,
        exited: false,
      });
    }
  }
  // Agents NVML does not list: shown, with no NVML memory, and said so (never joined by guess).
  const listed = new Set(processes.map((p) => p.pid));
  for (const agent of input.agents) {
    if (listed.has(agent.pid) || !agent.header) continue;
    const info = input.processInfo.get(agent.pid);
    for (const dev of agent.manifest.devices.length ? agent.manifest.devices : [0]) {
      processes.push({
        pid: agent.pid,
        device: dev,
        kind: "compute",
        used_bytes: null,
        user: info?.user ?? null,
        name: info?.name ?? null,
        command: info?.command ?? (agent.manifest.cmdline.join(" ") || null),
        pytorch: pytorchView(agent, dev, null),
        nvml_visible: false,
        exited: agent.exited,
      });
    }
  }
  const jobs = groupJobs(
    processes,
    input.agents.map((a) => {
      const info = input.processInfo.get(a.pid);
      return {
        pid: a.pid,
        ppid: info?.ppid ?? null,
        rank: a.manifest.rank,
        local_rank: a.manifest.local_rank,
        world_size: a.manifest.world_size,
        job: a.manifest.job ?? null,
        local_world_size: a.manifest.local_world_size ?? null,
        group_rank: a.manifest.group_rank ?? null,
        command: info?.command ?? (a.manifest.cmdline.join(" ") || null),
        exited: a.exited,
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
    devices: input.samples.map((s) => device(s, input.previous.get(s.index))),
    processes,
    jobs,
    warnings: input.warnings,
  };
}
