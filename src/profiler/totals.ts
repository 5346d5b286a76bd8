// A device's running totals, moved by each record as the ring header's rule says
// (GPUMEM_TOTALS_RULE in cuda/gpumem_ring.h, generated into src/ffi/wire.ts as TOTALS_RULE): the
// same rule the hook (gpumem_totals_apply) and the agent's line profiler (gpumem_agent/totals.py)
// follow, held together by test/profiler/totals-rule.test.ts on every committed recording. A new
// action gets its row in the header, and this follows; nothing here names an action.

import { MIN_BLOCK_SIZE, TOTALS_RULE } from "../ffi/wire";
import { ACTION } from "../ffi/events";

/** The counts the rule adds to, in a fixed order (indexes into Totals.counts). */
export const COUNT_NAMES = ["n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom"] as const;
export type CountName = (typeof COUNT_NAMES)[number];

// The rule by action code, for the per-record path: signs of requested, allocated, active and
// reserved, and the count's index (−1: none). A code without a row changes nothing.
interface Row {
  rq: number;
  al: number;
  ac: number;
  rs: number;
  count: number;
}
const NONE: Row = { rq: 0, al: 0, ac: 0, rs: 0, count: -1 };
const ROWS: Row[] = new Array<Row>(256).fill(NONE);
for (const [name, row] of Object.entries(TOTALS_RULE)) {
  const count = row.count === null ? -1 : COUNT_NAMES.indexOf(row.count);
  if (row.count !== null && count < 0) throw new Error(`TOTALS_RULE counts ${row.count}, which Totals does not keep`);
  ROWS[ACTION[name as keyof typeof ACTION]] = Object.freeze({ rq: row.requested, al: row.allocated, ac: row.active, rs: row.reserved, count });
}
Object.freeze(ROWS); // constant: the compiler may fold a call site's row

/** The rule's row for one action (what a loop that moves the totals itself applies). */
export function ruleRow(action: number): Readonly<Row> {
  return ROWS[action & 255]!;
}

/**
 * The block the caching allocator gives a request: at least MIN_BLOCK_SIZE bytes, a multiple of it.
 * Trace entries (the hook's records, a snapshot's device_traces) carry the size the program asked
 * for, while torch.cuda.memory_allocated() counts blocks; rounding here makes the two agree.
 */
export function blockSize(requested: number): number {
  return requested <= 0 ? 0 : Math.ceil(requested / MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE;
}

export class Totals {
  /** Live bytes as the program asked for them (the records' sizes): torch's requested_bytes. */
  requested = 0;
  allocated = 0;
  active = 0;
  reserved = 0;
  peakAllocated = 0;
  peakActive = 0;
  peakReserved = 0;
  /** By COUNT_NAMES. */
  readonly counts = new Float64Array(COUNT_NAMES.length);

  /** One record: `bytes` its size, `block` the block it moves (allocated and active count blocks). */
  apply(action: number, bytes: number, block: number): void {
    const r = ROWS[action & 255]!;
    this.requested += r.rq * bytes;
    this.allocated += r.al * block;
    this.active += r.ac * block;
    this.reserved += r.rs * bytes;
    if (r.al > 0 && this.allocated > this.peakAllocated) this.peakAllocated = this.allocated;
    if (r.ac > 0 && this.active > this.peakActive) this.peakActive = this.active;
    if (r.rs > 0 && this.reserved > this.peakReserved) this.peakReserved = this.reserved;
    if (r.count >= 0) this.counts[r.count]!++;
  }

  count(name: CountName): number {
    return this.counts[COUNT_NAMES.indexOf(name)]!;
  }

  /** torch.cuda.reset_peak_memory_stats(): each peak starts again from what is held now. */
  resetPeaks(): void {
    this.peakAllocated = this.allocated;
    this.peakActive = this.active;
    this.peakReserved = this.reserved;
  }
}
