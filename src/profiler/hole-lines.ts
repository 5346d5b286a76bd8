// Which lines' frees left the holes: the free ranges inside segments now (reserved but unallocated
// memory) by the user's line of the block that last held each of them. Two places know blocks
// freed since: the newest records, where the model keeps them (tail.ts: the screens'), an alloc
// record whose address lies in a free range now being freed since and the newest one at an address
// its last occupant; and, in every model, the newest frees of large blocks (freed-large.ts), for
// addresses the records do not reach. Without those the headless documents (`run --json`,
// `replay --json`, which keep no records) named no line. A query for the reserved-unallocated
// finding, not per record; bounded by what is kept.

import { ACTION } from "../ffi/events";
import type { DeviceState } from "./device";
import { LineSums, type LineSplit } from "./line-bytes";
import type { ProfilerModel } from "./model";

/** The free ranges inside the device's segments now, [start, end) pairs in address order. */
function freeRanges(d: DeviceState): number[] {
  const out: number[] = [];
  const slots = d.blocks.slotsByAddress();
  const b = d.blocks;
  let k = 0;
  for (const sa of d.segments.addresses()) {
    const end = sa + d.segments.size(sa)!;
    while (k < slots.length && b.address[slots[k]!]! < sa) k++;
    let cursor = sa;
    while (k < slots.length && b.address[slots[k]!]! < end) {
      const addr = b.address[slots[k]!]!;
      if (addr > cursor) out.push(cursor, addr);
      cursor = Math.max(cursor, addr + b.size[slots[k]!]!);
      k++;
    }
    if (end > cursor) out.push(cursor, end);
  }
  return out;
}

/** Whether `addr` lies in one of `ranges` (binary search over the sorted pairs). */
function inRanges(ranges: number[], addr: number): boolean {
  let lo = 0;
  let hi = ranges.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (addr < ranges[2 * mid]!) hi = mid - 1;
    else if (addr >= ranges[2 * mid + 1]!) lo = mid + 1;
    else return true;
  }
  return false;
}

/** The free ranges of device `d` by the line that allocated their last occupant, as far as the
 *  kept records and large frees reach; null where the model has no stacks. The split's total
 *  is the bytes of those occupants found (a hole whose occupant is older than both is not in it). */
export function holeLines(m: ProfilerModel, d: DeviceState, limit = 3): LineSplit | null {
  const stacks = m.stacks;
  if (!stacks) return null;
  const ranges = freeRanges(d);
  if (ranges.length === 0) return null;
  const sums = new LineSums(m);
  const seen = new Set<number>();
  const tail = m.tail;
  if (tail && tail.total > 0) {
    const fromExtra = m.recordStacks;
    const first = Math.max(tail.validFrom, tail.total - tail.capacity);
    for (let r = tail.total - 1; r >= first; r--) {
      const k = r % tail.capacity;
      if (tail.action[k] !== ACTION.alloc || tail.device[k] !== d.device) continue;
      const addr = tail.address[k]!;
      if (seen.has(addr)) continue;
      seen.add(addr);
      if (!inRanges(ranges, addr)) continue;
      // a snapshot's trace gives the stack; a ring's alloc carries it in `extra`
      const stack = tail.stack[k]! || (fromExtra ? tail.extra[k]! : 0);
      sums.add(stack, tail.block[k]! || tail.size[k]!);
    }
  }
  // The newest large frees: an address the records reached has its last occupant already.
  d.freedLarge.newestFirst((addr, size, stack) => {
    if (seen.has(addr)) return;
    seen.add(addr);
    if (inRanges(ranges, addr)) sums.add(stack, size);
  });
  return sums.split(limit);
}
