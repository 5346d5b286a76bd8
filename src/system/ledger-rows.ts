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
  /** NVML − reserved at the first sample (null before one). */
  context_bytes: number | null;
  /** Whether that sample came before torch's first allocation (reserved 0): the context alone. */
  context_before_first_allocation: boolean;
  /** Unmarked growth before the first step ended: kernels loaded on first use. */
  context_growth_bytes: number;
  libraries: LibraryPart[];
  jumps: Jump[];
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

const LIBRARY_NAMES: Record<string, string> = { nccl: "NCCL", cudart: "CUDA runtime", cublas: "cuBLAS", cudnn: "cuDNN", triton: "Triton", cupy: "CuPy", tensorrt: "TensorRT" };
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
    const seen = parts.context_before_first_allocation ? "seen before torch's first allocation" : "seen at the monitor's first sample, after torch's first allocation";
    const growth = parts.context_growth_bytes !== 0 ? `; ${parts.context_growth_bytes > 0 ? "+" : "−"}${formatBytes(Math.abs(parts.context_growth_bytes))} as kernels loaded in the first step` : "";
    rows.push({ kind: "context", name: "CUDA context", bytes: ctx, note: seen + growth });
    claimed += ctx;
  }
  for (const l of parts?.libraries ?? []) {
    const what = l.communicators > 0 ? `${l.communicators} communicator${l.communicators === 1 ? "" : "s"}` : `${l.events} event${l.events === 1 ? "" : "s"}`;
    rows.push({ kind: "library", name: libraryName(l.library), bytes: l.bytes, note: `${what}, last ${l.last_event || "(unnamed)"}` });
    claimed += l.bytes;
  }
  rows.push({ kind: "unexplained", name: "unexplained", bytes: nvml - claimed, note: parts && parts.context_bytes !== null ? null : "no sample of the process before this one: the context is not told apart" });
  return { nvml_used_bytes: nvml, outside_pytorch_bytes: nvml - input.reserved_bytes, rows, jumps: parts?.jumps ?? [] };
}

/** "3.1 GiB outside PyTorch: NCCL 2.4 GiB (3 communicators), CUDA context 512 MiB, unexplained
 *  180 MiB": the rows outside torch's reserved, largest first (unexplained always said). */
export function ledgerWords(l: Ledger): string {
  const outside = l.rows.filter((r) => r.kind === "context" || r.kind === "library");
  outside.sort((a, b) => b.bytes - a.bytes);
  const parts = outside.map((r) => {
    const comm = r.kind === "library" && r.note?.match(/^(\d+ communicators?)/);
    return `${r.name} ${formatBytes(r.bytes)}${comm ? ` (${comm[1]})` : ""}`;
  });
  const un = l.rows.find((r) => r.kind === "unexplained")!;
  parts.push(`unexplained ${un.bytes < 0 ? "−" : ""}${formatBytes(Math.abs(un.bytes))}`);
  return `${formatBytes(l.outside_pytorch_bytes)} outside PyTorch: ${parts.join(", ")}`;
}

