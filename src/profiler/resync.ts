// Block detail made whole again from a PyTorch snapshot's `segments` (the pickle the agent's
// dump_snapshot writes): blocks the model holds at the same address and size keep their phase, step
// and category; blocks the snapshot lacks go; blocks only the snapshot has are added.

import { segmentPoolKey } from "./pools";
import type { BlockTable } from "./blocks";
import { CAT_OTHER } from "./categories";
import type { SegmentTable } from "./segment-table";

/** A segment as a PyTorch snapshot lists it (frames and other fields ignored). */
export interface SnapshotSegment {
  address: number;
  total_size: number;
  stream?: number;
  device?: number;
  blocks?: Array<{ address: number; size: number; state: string }>;
  /** The segment's pool: (0, 0) the default one, else a CUDA graph's or a torch.cuda.MemPool's
   *  (pools.ts); absent in snapshots of torch before 2.1. */
  segment_pool_id?: unknown;
}

export interface Resynced {
  kept: number;
  added: number;
  dropped: number;
  /** The snapshot's reserved and active bytes (its segments; its blocks not yet free). */
  reserved: number;
  active: number;
}

/** Replace `blocks` and `segments` with the snapshot's. `leaving(slot)` runs for each block the
 *  snapshot lacks, before it goes. `t`: the snapshot's time, stamped on the blocks it adds. */
export function resyncFromSegments(
  blocks: BlockTable,
  segments: SegmentTable,
  snapshot: ReadonlyArray<SnapshotSegment>,
  t: number,
  leaving: (slot: number) => void,
): Resynced {
  const want = new Map<number, number>();
  let active = 0;
  const reserved = segments.replace(snapshot.map((g) => ({ address: g.address, size: g.total_size, stream: g.stream ?? 0, pool: segmentPoolKey(g.segment_pool_id) })));
  for (const seg of snapshot)
    for (const b of seg.blocks ?? []) {
      if (b.state === "active_allocated") want.set(b.address, b.size);
      if (b.state === "active_allocated" || b.state === "active_awaiting_free") active += b.size;
    }
  let kept = 0;
  let dropped = 0;
  for (const slot of blocks.bySlot.values()) {
    const size = want.get(blocks.address[slot]!);
    if (size === blocks.size[slot]) {
      want.delete(blocks.address[slot]!);
      kept++;
    } else {
      leaving(slot);
      blocks.forget(slot);
      dropped++;
    }
  }
  for (const [address, size] of want) blocks.addResynced(address, size, CAT_OTHER, undefined, t);
  blocks.clearResynced();
  return { kept, added: want.size, dropped, reserved, active };
}
