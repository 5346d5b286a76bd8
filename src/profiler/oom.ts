// Out-of-memory incidents of one device: what the allocator was asked for, what the device and
// PyTorch held at that moment, and what live memory was made of. The first ones are kept: later
// ones are usually the same story.

import type { LineSums } from "./line-bytes";

/** How many OOM incidents a device keeps. */
export const MAX_OOMS = 16;

export interface OomIncident {
  time_us: number;
  step: number;
  phase: number;
  range: number;
  request_bytes: number;
  device_free_bytes: number;
  allocated_bytes: number;
  reserved_bytes: number;
  active_bytes: number;
  largest_free_block_bytes: number;
  live_by_category_bytes: Float64Array;
  nvml_used_bytes: number | null;
  /** The stack of the request that failed (the hook's, where stacks are on; a snapshot's frames); 0: none. */
  stack: number;
  /** The live blocks then by stack, for the lines holding most (line-bytes.ts); null without stacks. */
  live_lines: LineSums | null;
}

export class OomLog {
  /** Every OOM record seen, kept or not. */
  count = 0;
  readonly kept: OomIncident[] = [];

  /** Whether the next incident is kept (the caller skips its costly figures otherwise). */
  get full(): boolean {
    return this.kept.length >= MAX_OOMS;
  }

  add(incident: () => OomIncident): void {
    this.count++;
    if (!this.full) this.kept.push(incident());
  }
}
