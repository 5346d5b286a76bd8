// The document as Prometheus text exposition (format 0.0.4). Pure: document in, text out.
//
// GPU-level figures keep the names, units and labels dcgm-exporter uses for the same NVML
// numbers (DCGM_FI_DEV_*; framebuffer in MiB, power in W), so dashboards built for it keep
// working beside ours. What only we know (processes, PyTorch's allocator) follows Prometheus
// conventions: gpumem_ prefix, base units in the name, _total for counters, snake_case labels
// (promtool's lint flags dcgm-exporter's camelCase labels; we keep them only on its metrics).
// So the labels follow two conventions, one per family: DCGM_FI_* carry dcgm-exporter's own
// (gpu, UUID, device, modelName, Hostname, pci_bus_id); every gpumem_* carries lowercase
// snake_case (gpu, uuid, hostname, pid, …).
import pkg from "../../package.json";
import type { Document } from "../system/schema";
import { SCHEMA_VERSION } from "../system/version";

/** What built the exposition, as gpumem_build_info says it. */
export interface BuildInfo {
  version: string;
  bun: string;
  schema: number;
}

export const BUILD: BuildInfo = { version: pkg.version, bun: Bun.version, schema: SCHEMA_VERSION };

type Labels = Record<string, string | number | null | undefined>;

/** How many lines of a process's code gpumem_pytorch_line_live_bytes carries (its label cardinality). */
export const PROMETHEUS_LINES = 5;
const LINE_HELP = `Live allocator bytes by the line of the user's code that allocated them (the ${PROMETHEUS_LINES} holding most; line="(unknown)": blocks without a known line), where stacks are recorded; sampled small blocks count as the bytes they stand for.`;

interface Family {
  name: string;
  help: string;
  type: "gauge" | "counter";
  samples: { labels: Labels; value: number }[];
}

function escape(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels)
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${k}="${escape(String(v))}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

function number(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

export function exposition(doc: Document, build: BuildInfo = BUILD): string {
  const families = new Map<string, Family>();
  const add = (name: string, type: Family["type"], help: string, labels: Labels, value: number | null | undefined) => {
    if (value === null || value === undefined) return; // not available: absent, never 0
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, help, type, samples: [] }));
    f.samples.push({ labels, value });
  };
  const MiB = 1024 * 1024;
  const devices = new Map(doc.devices.map((d) => [d.index, d]));
  for (const d of doc.devices) {
    const l = { gpu: d.index, UUID: d.uuid, device: `nvidia${d.index}`, modelName: d.name, Hostname: doc.host, pci_bus_id: d.pci_bus_id };
    const mib = (b: number | null) => (b === null ? null : Math.round(b / MiB));
    add("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", l, mib(d.memory_used_bytes));
    add("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", l, mib(d.memory_free_bytes));
    add("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", l, mib(d.memory_reserved_bytes));
    add("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", l, d.gpu_utilization_percent);
    add("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", l, d.memory_utilization_percent);
    add("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", l, d.encoder_utilization_percent);
    add("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", l, d.decoder_utilization_percent);
    add("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", l, d.temperature_celsius);
    add("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", l, d.power_draw_milliwatts === null ? null : d.power_draw_milliwatts / 1000);
    add("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", l, d.sm_clock_mhz);
    add("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", l, d.memory_clock_mhz);
    add("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in %).", l, d.fan_speed_percent);
    add("gpumem_gpu_memory_total_bytes", "gauge", "Total GPU memory, bytes.", { gpu: d.index, uuid: d.uuid, hostname: doc.host }, d.memory_total_bytes);
    add("gpumem_gpu_memory_used_bytes", "gauge", "GPU memory used, bytes (NVML).", { gpu: d.index, uuid: d.uuid, hostname: doc.host }, d.memory_used_bytes);
    add("gpumem_gpu_power_limit_watts", "gauge", "Enforced power limit, watts.", { gpu: d.index, uuid: d.uuid, hostname: doc.host }, d.power_limit_milliwatts === null ? null : d.power_limit_milliwatts / 1000);
    add("gpumem_gpu_pcie_rx_bytes_per_second", "gauge", "PCIe receive throughput, bytes per second.", { gpu: d.index, uuid: d.uuid, hostname: doc.host }, d.pcie_rx_bytes_per_second);
    add("gpumem_gpu_pcie_tx_bytes_per_second", "gauge", "PCIe transmit throughput, bytes per second.", { gpu: d.index, uuid: d.uuid, hostname: doc.host }, d.pcie_tx_bytes_per_second);
    for (const r of d.ledger?.rows ?? [])
      add("gpumem_gpu_ledger_bytes", "gauge", "What the GPU's memory is made of, summing to its total: processes (the monitor's user's), other_users, gone (no such process: exited with its memory held, or in another container), not_listed, driver_reserved, free.", { gpu: d.index, uuid: d.uuid, hostname: doc.host, kind: r.kind }, r.bytes);
  }
  for (const p of doc.processes) {
    const uuid = devices.get(p.device)?.uuid;
    // `training_job`, not `job`: Prometheus gives every series its scrape job in `job`.
    const base = { hostname: doc.host, gpu: p.device, uuid, pid: p.pid, process: p.name, rank: p.pytorch?.rank, training_job: p.pytorch?.job };
    add("gpumem_process_gpu_memory_bytes", "gauge", "GPU memory NVML attributes to the process, bytes.", base, p.used_bytes);
    const t = p.pytorch;
    if (!t) continue;
    add("gpumem_pytorch_allocated_bytes", "gauge", "torch.cuda.memory_allocated(): bytes in live tensors.", base, t.allocated_bytes);
    add("gpumem_pytorch_reserved_bytes", "gauge", "torch.cuda.memory_reserved(): bytes the caching allocator holds.", base, t.reserved_bytes);
    add("gpumem_pytorch_active_bytes", "gauge", "Allocated bytes plus freed blocks still in use by a stream.", base, t.active_bytes);
    add("gpumem_pytorch_peak_allocated_bytes", "gauge", "Peak allocated bytes since the last reset.", base, t.peak_allocated_bytes);
    add("gpumem_pytorch_peak_reserved_bytes", "gauge", "Peak reserved bytes since the last reset.", base, t.peak_reserved_bytes);
    add("gpumem_pytorch_non_pytorch_bytes", "gauge", "NVML used minus reserved: CUDA context, NCCL, cuBLAS workspaces.", base, t.non_pytorch_bytes);
    // The ledger's rows sum to the process's NVML used at the same sample (kind: allocated,
    // reserved_unallocated, private_pool, context, library, unexplained; component: the row's name).
    for (const r of t.ledger?.rows ?? [])
      add("gpumem_ledger_bytes", "gauge", "What NVML's used bytes of the process are made of, row by row (they sum to gpumem_process_gpu_memory_bytes at the same sample): PyTorch's allocated, reserved-unallocated and private pools, the CUDA context, each library by the agent's marks (NCCL…), and unexplained.", { ...base, kind: r.kind, component: r.name }, r.bytes);
    add("gpumem_pytorch_allocs_total", "counter", "Allocations since the agent attached.", base, t.alloc_count);
    add("gpumem_pytorch_ooms_total", "counter", "Out-of-memory errors since the agent attached.", base, t.oom_count);
    add("gpumem_pytorch_alloc_retries_total", "counter", "Allocation retries (cache flushed and retried).", base, t.alloc_retries);
    add("gpumem_pytorch_step", "gauge", "Training step (optimizer steps completed).", base, t.step);
    add("gpumem_pytorch_phase", "gauge", "1 for the phase the process is in.", { ...base, phase: t.phase }, 1);
    // Batches only where the agent said the input's shape (else the forecast counts multiples of it).
    const fc = t.forecast;
    add("gpumem_forecast_max_batch", "gauge", "The largest batch whose forecast step peak (with the allocator's free memory it cannot give back there) fits the room the allocator has; the JSON's forecast says its basis.", base, fc && fc.batch !== null ? fc.max_batch : null);
    add("gpumem_forecast_oom_steps", "gauge", "Where memory held at step boundaries grows: steps until the step's peak no longer fits (the growth finding's rate).", base, fc?.time_to_oom?.steps);
    const prof = t.profile;
    if (!prof) continue;
    for (const c of prof.categories)
      add("gpumem_pytorch_live_bytes", "gauge", "Live allocator bytes by category (parameter, gradient, optimizer_state, activation, …), from the monitor's model.", { ...base, category: c.category }, c.bytes);
    // The lines holding the most, a few (a label value per line: bounded, whatever the program).
    for (const l of prof.lines?.top.slice(0, PROMETHEUS_LINES) ?? []) add("gpumem_pytorch_line_live_bytes", "gauge", LINE_HELP, { ...base, line: l.at }, l.bytes);
    if (prof.lines) add("gpumem_pytorch_line_live_bytes", "gauge", LINE_HELP, { ...base, line: "(unknown)" }, prof.lines.unknown_bytes);
    add("gpumem_pytorch_block_detail_partial", "gauge", "1 where the monitor's block detail is incomplete (records lost, memory from before the attach, a resync); totals stay exact.", base, prof.detail.partial ? 1 : 0);
    for (const f of prof.findings)
      add("gpumem_finding_active", "gauge", "1 for each finding the monitor holds of the process (id, severity); its title and evidence are in the JSON.", { ...base, finding: f.id, severity: f.severity }, 1);
  }
  add("gpumem_devices", "gauge", "GPUs NVML reports on this host.", { hostname: doc.host }, doc.devices.length);
  // Without NVML the page would be one bare line: this says why (the document's reason), so an
  // alert on gpumem_nvml_up == 0 tells what to fix.
  add("gpumem_nvml_up", "gauge", "1 where NVML answered this sample; 0 where it did not, with the reason (no driver, NVML failed) in the reason label.", { hostname: doc.host, reason: doc.reason }, doc.reason === null ? 1 : 0);
  add("gpumem_build_info", "gauge", "Always 1: the gpumem-tui version, the Bun runtime and the JSON document's schema version that made these metrics.", { version: build.version, bun: build.bun, schema: build.schema }, 1);
  const out: string[] = [];
  for (const f of families.values()) {
    out.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) out.push(`${f.name}${labelText(s.labels)} ${number(s.value)}`);
  }
  return `${out.join("\n")}\n`;
}
