// The Overview's process table, nvtop / nvitop / htop style: which columns fit the width and what
// each cell of a process or a job row says. Unknown is "–", never 0.
import type { Job, Process } from "../../system/schema";
import { formatBytes, formatDuration, pad, UNKNOWN } from "../format";

interface Column {
  title: string;
  width: number;
  right?: boolean;
  /** A space before the cell (between two right-aligned numbers and what follows). */
  gap?: boolean;
  process: (p: Process, inJob: boolean) => string;
  job: (j: Job, users: Set<string>) => string;
}

const bytesOr = (v: number | null | undefined) => (v === null || v === undefined ? UNKNOWN : formatBytes(v));
const pctOr = (v: number | null | undefined) => (v === null || v === undefined ? UNKNOWN : `${Math.round(v)}%`);

function devicesOf(job: Job): string {
  const devices = [...new Set(job.ranks.map((r) => r.device).filter((d): d is number => d !== null))].sort((a, b) => a - b);
  const contiguous = devices.length > 1 && devices[devices.length - 1]! - devices[0]! === devices.length - 1;
  return contiguous ? `${devices[0]}-${devices[devices.length - 1]}` : devices.join(",");
}

const PID: Column = {
  title: "PID",
  width: 8,
  // A rank of a job: its pid indented under the job's row.
  process: (p, inJob) => (inJob ? `${String(p.pid).length <= 6 ? "  " : " "}${p.pid}` : String(p.pid)),
  job: () => "job",
};
const USER: Column = { title: "USER", width: 9, process: (p) => p.user ?? "?", job: (_j, users) => (users.size === 1 ? [...users][0]! : "") };
const GPU: Column = { title: "GPU", width: 4, process: (p) => String(p.device), job: devicesOf };
const SM: Column = { title: "SM%", width: 4, right: true, process: (p) => pctOr(p.gpu_sm_percent), job: () => "" };
const NVML: Column = { title: "GPU MEM", width: 11, right: true, process: (p) => (p.used_bytes === null ? UNKNOWN : formatBytes(p.used_bytes)), job: (j) => bytesOr(j.used_bytes) };
const ALLOCATED: Column = { title: "ALLOCATED", width: 11, right: true, gap: true, process: (p) => (p.pytorch ? formatBytes(p.pytorch.allocated_bytes) : UNKNOWN), job: (j) => formatBytes(j.allocated_bytes) };
const RESERVED: Column = { title: "RESERVED", width: 11, right: true, process: (p) => (p.pytorch ? formatBytes(p.pytorch.reserved_bytes) : UNKNOWN), job: (j) => formatBytes(j.reserved_bytes) };
const CPU: Column = { title: "CPU%", width: 6, right: true, process: (p) => pctOr(p.cpu_percent), job: () => "" };
const HOST: Column = { title: "HOST MEM", width: 11, right: true, process: (p) => bytesOr(p.host_memory_bytes), job: () => "" };
const TIME: Column = { title: "TIME", width: 10, right: true, process: (p) => (p.run_time_seconds === null ? UNKNOWN : formatDuration(p.run_time_seconds)), job: () => "" };
const PHASE: Column = {
  title: "PHASE",
  width: 9,
  gap: true,
  process: (p) => p.pytorch?.phase ?? "",
  job: (j) => {
    const phases = new Set(j.ranks.map((r) => r.phase).filter((x) => x !== null));
    return phases.size === 1 ? [...phases][0]! : phases.size ? "mixed" : "";
  },
};
const STEP: Column = {
  title: "STEP",
  width: 6,
  right: true,
  process: (p) => (p.pytorch ? String(p.pytorch.step) : ""),
  job: (j) => (j.step_min === null ? "" : j.step_min === j.step_max ? String(j.step_min) : `${j.step_min}-${j.step_max}`),
};
const RANK: Column = {
  title: "RANK",
  width: 5,
  gap: true,
  process: (p) => (p.pytorch?.rank === null || !p.pytorch ? "" : String(p.pytorch.rank)),
  job: (j) => `${new Set(j.ranks.map((r) => r.rank)).size}/${j.world_size}`,
};

/** The columns a width holds, in order, and what is left for COMMAND. At 80 columns: PID, GPU,
 *  SM%, GPU memory, PyTorch's allocated and reserved, phase, step (and rank where a process has
 *  one); wider, the host's figures (CPU %, resident memory, run time) and USER join, as room allows. */
export function tableColumns(width: number, ranks = true): { cols: Column[]; command: number } {
  const base = [PID, GPU, SM, NVML, ALLOCATED, RESERVED, PHASE, STEP, ...(ranks ? [RANK] : [])];
  const cellWidth = (c: Column) => c.width + (c.gap ? 1 : 0);
  let used = base.reduce((s, c) => s + cellWidth(c), 0);
  const minCommand = 30;
  const extra = new Set<Column>();
  for (const c of [CPU, USER, HOST, TIME]) {
    if (used + cellWidth(c) + minCommand > width - 1) break;
    extra.add(c);
    used += cellWidth(c);
  }
  const order = [PID, ...(extra.has(USER) ? [USER] : []), GPU, SM, NVML, ALLOCATED, RESERVED, ...[CPU, HOST, TIME].filter((c) => extra.has(c)), PHASE, STEP, ...(ranks ? [RANK] : [])];
  return { cols: order, command: Math.max(4, width - 1 - used) };
}

export type Table = ReturnType<typeof tableColumns>;

function line(t: Table, cell: (c: Column) => string, command: string): string {
  return t.cols.map((c) => (c.gap ? " " : "") + pad(cell(c), c.width, c.right)).join("") + " " + pad(command, t.command - 1);
}

export const headerCells = (t: Table, title: string) => line(t, (c) => c.title, title);
export const processCells = (t: Table, p: Process, inJob: boolean) =>
  line(t, (c) => c.process(p, inJob), `${p.exited ? "[exited] " : ""}${p.command ?? p.name ?? ""}`);
export const jobCells = (t: Table, j: Job, users: Set<string>, title: string) => line(t, (c) => c.job(j, users), title);
