// Whether an NVML read of a process and torch's reserved bytes beside it are of one moment: the
// ledger (src/profiler/ledger.ts) takes NVML used − reserved as what is outside PyTorch, so a
// segment torch reserved or freed between the two reads lands in that difference (a 2 MiB
// cudaMalloc 4 ms after the tick's header read made a context of 612 MiB for 610). The monitor
// reads the ring's header (its live totals) before NVML, in the agents' refresh; a second read
// after NVML brackets it: torch's reserved and segment counts unchanged across the two say no
// segment came or went while NVML was read.
import type { RingHeader } from "../ffi/events";
import { RingError } from "../ffi/ring";
import type { Agent } from "./agents";

/** The agent's header now (after an NVML read), for reservedStill: an exited agent's is its last
 *  (nothing moves after exit); null where it cannot be read (no ring, or one gone bad). */
export function headerNow(a: Agent): RingHeader | null {
  if (a.exited) return a.header;
  if (!a.ring) return null;
  try {
    return a.ring.header();
  } catch (e) {
    if (e instanceof RingError) return null; // the tick's ring read says what went wrong
    throw e;
  }
}

/** Whether `device`'s reserved bytes and segment counts are the same in both headers (read on
 *  either side of an NVML read); false where either is missing: not known to be one moment. */
export function reservedStill(before: RingHeader | null, after: RingHeader | null, device: number): boolean {
  if (!before || !after) return false;
  const b = before.totals.find((t) => t.device === device);
  const a = after.totals.find((t) => t.device === device);
  // A device with no totals in either header: torch reserved nothing there in both.
  if (!b || !a) return !b && !a;
  return b.reserved === a.reserved && b.n_segment_alloc === a.n_segment_alloc && b.n_segment_free === a.n_segment_free;
}
