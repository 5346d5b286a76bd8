// The line profiler's figures from the monitor's own model: the hook stamps each record with the
// line running when it happened (the header's cur_line, set by @gpumem_agent.profile), so the
// model attributes each record to its line as it ingests it. Per line: the blocks its alloc and
// free records moved, and the device's active and reserved bytes at its highest after one of them.
// Lines that made no allocator record have no row (the agent's own table at exit counts hits too).

import { ACTION } from "../ffi/events";
import { blockSize } from "./totals";

export interface LineRow {
  /** The line id (the manifest's `lines`). */
  line: number;
  /** "file.py:42" from the manifest, or null while the manifest has not named it. */
  location: string | null;
  /** The line's code as the agent read it ("" when unnamed). */
  code: string;
  device: number;
  n_alloc: number;
  n_free: number;
  alloc_bytes: number;
  freed_bytes: number;
  peak_active_bytes: number;
  peak_reserved_bytes: number;
}

type Row = Omit<LineRow, "location" | "code">;

export class LineTable {
  private readonly byLine = new Map<number, Row>();

  /** A record stamped with `line` (not 0), after its device's totals took it. */
  record(line: number, device: number, action: number, requested: number, active: number, reserved: number): void {
    let r = this.byLine.get(line);
    if (!r) this.byLine.set(line, (r = { line, device, n_alloc: 0, n_free: 0, alloc_bytes: 0, freed_bytes: 0, peak_active_bytes: 0, peak_reserved_bytes: 0 }));
    if (action === ACTION.alloc) {
      r.n_alloc++;
      r.alloc_bytes += blockSize(requested);
    } else if (action === ACTION.free_requested || action === ACTION.free) {
      r.n_free++;
      r.freed_bytes += blockSize(requested);
    }
    if (active > r.peak_active_bytes) r.peak_active_bytes = active;
    if (reserved > r.peak_reserved_bytes) r.peak_reserved_bytes = reserved;
  }

  get size(): number {
    return this.byLine.size;
  }

  /** Every line seen, the heaviest first (peak active, then bytes allocated), named from `names`. */
  rows(names: ReadonlyMap<number, string>): LineRow[] {
    return [...this.byLine.values()]
      .map((r) => {
        const name = names.get(r.line);
        // The manifest's name is "file.py:42: code".
        const m = name ? /^(.*?:\d+): ?(.*)$/.exec(name) : null;
        return { ...r, location: m ? m[1]! : (name ?? null), code: m ? m[2]! : "" };
      })
      .sort((a, b) => b.peak_active_bytes - a.peak_active_bytes || b.alloc_bytes - a.alloc_bytes || a.line - b.line);
  }
}
