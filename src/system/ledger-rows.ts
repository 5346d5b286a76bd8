// The ledger's rows at one sample (issue 40): what is outside PyTorch, summing exactly to NVML's
// used bytes of the process. The attribution over time is src/profiler/ledger.ts's (LedgerTrack);
// this is the one function that turns it and one sample's figures into the document's rows.
import { formatBytes } from "../words";

export interface LibraryPart {
  library: string;
  /** NVML − reserved that changed while its marks were open (negative: freed, a destroy). */
  bytes: number;
  /** Its events seen (marks entered). */
  events: number;
  /** NCCL: communicators made (makesCommunicator). */
  communicators: number;
  /** Its newest event's name. */
  last_event: string;
}

export interface Jump {
  time_us: number;
  bytes: number;
  /** The mark it followed: "gpumem:nccl:first_collective:all_reduce", or "step 3 (forward)". */
  after: string;
}

/** What the ledger knows beyond one sample's figures: its track's attribution. */
export interface LedgerParts {
  /** NVML − reserved at the first sample, with context_settling_bytes (null before one). */
  context_bytes: number | null;
  /** Of context_bytes, what came after a first sample taken before torch's first allocation, up to
   *  the first sample after it, with no mark open: the context still being made when NVML was
   *  first read (0 where the first figure stood). */
  context_settling_bytes: number;
  /** Whether that sample came before torch's first allocation (reserved 0): the context alone. */
  context_before_first_allocation: boolean;
  /** Libraries whose marks came before that sample: what they made is in the context's figure. */
  context_includes: string[];
  /** Set where that first sample came after torch had allocated and the program had run (attached
   *  into it, or `steps` done): the figure is the context and what libraries loaded before the
   *  monitor saw the process (cuBLAS workspaces, kernels), not told apart. Null: the context's own. */
  context_late: { attached: boolean; steps: number } | null;
  /** Unmarked growth before the first step ended: kernels loaded on first use. */
  context_growth_bytes: number;
  libraries: LibraryPart[];
  jumps: Jump[];
  /** Each jump's optimizer steps completed when it came (jumps' order): warm-up or not. */
  jump_steps: number[];
}

export type LedgerRowKind = "allocated" | "reserved_unallocated" | "private_pool" | "context" | "library" | "unexplained";

export interface LedgerRow {
  kind: LedgerRowKind;
  /** What the row is, in words: "PyTorch allocated", "private pool (1, 0)", "NCCL". */
  name: string;
  bytes: number;
  /** What more is known: "3 communicators", "before torch's first allocation". */
  note: string | null;
}

export interface Ledger {
  /** NVML's used bytes the rows sum to. */
  nvml_used_bytes: number;
  /** Everything but torch's reserved: the context, libraries and unexplained. */
  outside_pytorch_bytes: number;
  rows: LedgerRow[];
  jumps: Jump[];
}

/** A private pool's figures (the profile's private_pools). */
export interface PoolFigures {
  pool_id: readonly [number, number];
  reserved_bytes: number;
  allocated_bytes: number;
}

export interface LedgerInput {
  nvml_used_bytes: number;
  allocated_bytes: number;
  reserved_bytes: number;
  /** The private pools (CUDA graphs, MemPool), counted in allocated and reserved. */
  private_pools: readonly PoolFigures[];
  parts: LedgerParts | null;
}

/** The context row's name where the monitor first saw the process after it ran (context_late). */
export const CONTEXT_LATE_NAME = "CUDA context and libraries loaded before the monitor saw the process";

const LIBRARY_NAMES: Record<string, string> = { nccl: "NCCL", cudagraphs: "CUDA graphs", cudart: "CUDA runtime", cublas: "cuBLAS", cudnn: "cuDNN", triton: "Triton", cupy: "CuPy", tensorrt: "TensorRT" };
export const libraryName = (library: string): string => LIBRARY_NAMES[library] ?? library;

/** The rows at one sample, summing exactly to `nvml_used_bytes` (unexplained takes the rest). */
export function ledgerRows(input: LedgerInput): Ledger {
  const nvml = input.nvml_used_bytes;
  let poolReserved = 0;
  let poolAllocated = 0;
  for (const p of input.private_pools) {
    poolReserved += p.reserved_bytes;
    poolAllocated += p.allocated_bytes;
  }
  const rows: LedgerRow[] = [];
  rows.push({ kind: "allocated", name: "PyTorch allocated", bytes: input.allocated_bytes - poolAllocated, note: poolAllocated > 0 ? "default pool" : null });
  rows.push({ kind: "reserved_unallocated", name: "reserved, unallocated", bytes: input.reserved_bytes - input.allocated_bytes - (poolReserved - poolAllocated), note: "default pool: empty_cache() would return it" });
  for (const p of input.private_pools)
    rows.push({ kind: "private_pool", name: `private pool (${p.pool_id[0]}, ${p.pool_id[1]})`, bytes: p.reserved_bytes, note: `${formatBytes(p.allocated_bytes)} allocated: CUDA graphs or MemPool` });
  const parts = input.parts;
  let claimed = input.reserved_bytes;
  if (parts && parts.context_bytes !== null) {
    const ctx = parts.context_bytes + parts.context_growth_bytes;
    const late = parts.context_late;
    // Never the bare context's name for a figure that holds more: how much of it the context is,
    // the monitor did not see (a bare context's size varies with the GPU, driver and CUDA).
    const seen = late
      ? `first seen ${late.attached ? "when the monitor attached, after the program had run" : `after ${late.steps} step${late.steps === 1 ? "" : "s"}, torch's memory already allocated`}: the CUDA context alone is not told apart from the libraries, workspaces and kernels loaded before then`
      : parts.context_before_first_allocation
      ? parts.context_settling_bytes !== 0
        ? `seen before torch's first allocation at ${formatBytes(parts.context_bytes - parts.context_settling_bytes)}${parts.context_settling_bytes > 0 ? ", still being made" : ""}; whole at the first sample after it`
        : "seen before torch's first allocation"
      : "seen at the monitor's first sample, after torch's first allocation";
    const growth = parts.context_growth_bytes !== 0 ? `; ${parts.context_growth_bytes > 0 ? "+" : "−"}${formatBytes(Math.abs(parts.context_growth_bytes))} as kernels loaded in the first step` : "";
    const incl = parts.context_includes.length ? `; includes what ${parts.context_includes.map(libraryName).join(" and ")} made before that sample` : "";
    rows.push({ kind: "context", name: late ? CONTEXT_LATE_NAME : "CUDA context", bytes: ctx, note: seen + incl + growth });
    claimed += ctx;
  }
  for (const l of parts?.libraries ?? []) {
    const what = l.communicators > 0 ? `${l.communicators} communicator${l.communicators === 1 ? "" : "s"}` : `${l.events} event${l.events === 1 ? "" : "s"}`;
    rows.push({ kind: "library", name: libraryName(l.library), bytes: l.bytes, note: `${what}, last ${l.last_event || "(unnamed)"}` });
    claimed += l.bytes;
  }
  rows.push({ kind: "unexplained", name: "unexplained", bytes: nvml - claimed, note: parts && parts.context_bytes !== null ? null : "no NVML sample of the process yet at one moment with torch's figures (NVML at or above reserved): the context is not told apart" });
  return { nvml_used_bytes: nvml, outside_pytorch_bytes: nvml - input.reserved_bytes, rows, jumps: parts?.jumps ?? [] };
}

/** The rows outside torch's reserved (the context, each library), largest first. */
export function outsideRows(l: Ledger): LedgerRow[] {
  return l.rows.filter((r) => r.kind === "context" || r.kind === "library").sort((a, b) => b.bytes - a.bytes);
}

/** "unexplained 180.00 MiB" (or "−2.00 MiB": NVML and reserved a little apart). */
export function unexplainedWords(l: Ledger): string {
  const b = l.rows.find((r) => r.kind === "unexplained")!.bytes;
  return `unexplained ${b < 0 ? "−" : ""}${formatBytes(Math.abs(b))}`;
}

/** "3.1 GiB outside PyTorch: NCCL 2.4 GiB (3 communicators), CUDA context 512 MiB, unexplained
 *  180 MiB": the rows outside torch's reserved, largest first (unexplained always said). */
export function ledgerWords(l: Ledger): string {
  const parts = outsideRows(l).map((r) => {
    const comm = r.kind === "library" && r.note?.match(/^(\d+ communicators?)/);
    return `${r.name} ${formatBytes(r.bytes)}${comm ? ` (${comm[1]})` : ""}`;
  });
  parts.push(unexplainedWords(l));
  return `${formatBytes(l.outside_pytorch_bytes)} outside PyTorch: ${parts.join(", ")}`;
}


export type GpuLedgerRowKind = "processes" | "other_users" | "gone" | "not_listed" | "driver_reserved" | "free";

export interface GpuLedgerRow {
  kind: GpuLedgerRowKind;
  bytes: number;
  /** The pids the row stands for (processes, other users, gone), else empty. */
  pids: number[];
}

export interface GpuLedger {
  /** What the rows sum to: the GPU's total memory. */
  total_bytes: number;
  /** The monitor runs in a pid namespace of its own (a container): the driver lists to NVML only
   *  that namespace's processes, so not_listed holds the memory of every process outside it. */
  container_view: boolean;
  rows: GpuLedgerRow[];
  /** The findings in words: a GPU whose memory a process that no longer exists holds. */
  words: string[];
}

/** A process NVML lists on the GPU, as the document has it (user and name from /proc: null where
 *  /proc has no such pid). */
export interface ListedProcess {
  pid: number;
  used_bytes: number | null;
  user: string | null;
  name: string | null;
  command: string | null;
}

/** What a GPU's memory is made of, summing to its total: NVML's used by the processes it lists
 *  (the monitor's user's, other users', and those /proc has no process of: exited with their
 *  memory still held, or in another container), used that no listed process accounts for, the
 *  driver's reserve (NVML's v2 memory figures; v1 counts it in used) and free. Null without
 *  NVML's memory figures. `user`: the monitor's own user (null: no split by user). */
export function gpuLedger(d: { memory_total_bytes: number | null; memory_used_bytes: number | null; memory_free_bytes: number | null; memory_reserved_bytes: number | null }, listed: readonly ListedProcess[], user: string | null, containerView = false): GpuLedger | null {
  if (d.memory_total_bytes === null || d.memory_used_bytes === null || d.memory_free_bytes === null) return null;
  const rows: Record<"processes" | "other_users" | "gone", GpuLedgerRow> = {
    processes: { kind: "processes", bytes: 0, pids: [] },
    other_users: { kind: "other_users", bytes: 0, pids: [] },
    gone: { kind: "gone", bytes: 0, pids: [] },
  };
  let listedBytes = 0;
  for (const p of listed) {
    if (p.used_bytes === null) continue;
    const gone = p.user === null && p.name === null && p.command === null;
    const row = gone ? rows.gone : user !== null && p.user !== user ? rows.other_users : rows.processes;
    row.bytes += p.used_bytes;
    row.pids.push(p.pid);
    listedBytes += p.used_bytes;
  }
  // Used that no listed process accounts for: what the total leaves once the listed processes, the
  // driver's reserve and free are taken (NVML's used less the listed where its figures agree).
  const notListed = d.memory_total_bytes - listedBytes - (d.memory_reserved_bytes ?? 0) - d.memory_free_bytes;
  const out: GpuLedgerRow[] = [rows.processes, rows.other_users, rows.gone, { kind: "not_listed", bytes: notListed, pids: [] }];
  if (d.memory_reserved_bytes !== null) out.push({ kind: "driver_reserved", bytes: d.memory_reserved_bytes, pids: [] });
  out.push({ kind: "free", bytes: d.memory_free_bytes, pids: [] });
  const words: string[] = [];
  if (rows.gone.bytes > 0)
    words.push(`${formatBytes(rows.gone.bytes)} held by ${rows.gone.pids.length === 1 ? `pid ${rows.gone.pids[0]}` : `pids ${rows.gone.pids.join(", ")}`}, which no longer ${rows.gone.pids.length === 1 ? "exists" : "exist"} here (exited with its memory still held, or in another container)`);
  return { total_bytes: d.memory_total_bytes, container_view: containerView, rows: out, words };
}
