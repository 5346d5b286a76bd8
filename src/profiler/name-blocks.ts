// The agent's tensor names on a device's blocks: each tensor names the block holding its address
// and gives it its category; where records were lost, a named tensor the model has no block for
// is added, so block detail resynchronizes.

import type { BlockTable } from "./blocks";
import { categoryCode } from "./categories";
import type { Lifetimes } from "./lifetimes";

/** A tensor as the agent's `names` verb reports it (docs/protocol.md). */
export interface NamedTensor {
  address: number;
  size: number;
  name?: string | null;
  category?: string | null;
  shape?: number[];
  dtype?: string;
  /** CUDA device index, or "cuda:N". */
  device?: number | string;
}

export interface Named {
  matched: number;
  added: number;
  unknown: number;
}

/** The tensors by device index; a tensor without numeric address and size, or with a device that
 *  is neither N nor "cuda:N", is an error that names it. */
export function byDevice(tensors: NamedTensor[]): Map<number, NamedTensor[]> {
  const out = new Map<number, NamedTensor[]>();
  for (const t of tensors) {
    if (typeof t?.address !== "number" || typeof t.size !== "number")
      throw new TypeError(`a named tensor needs numeric address and size, got ${JSON.stringify(t)}`);
    const dev = parseDevice(t.device);
    let list = out.get(dev);
    if (!list) out.set(dev, (list = []));
    list.push(t);
  }
  return out;
}

function parseDevice(dev: number | string | undefined): number {
  if (dev === undefined) return 0;
  if (typeof dev === "number") return dev;
  const m = /^(?:cuda:)?(\d+)$/.exec(dev);
  if (!m) throw new TypeError(`a named tensor's device must be N or "cuda:N", got ${JSON.stringify(dev)}`);
  return Number(m[1]);
}

/** Name one device's blocks. `partial`: its detail misses blocks (records lost, frees of unseen
 *  blocks), so a named tensor without a block is added at `t`. */
export function nameBlocks(blocks: BlockTable, lifetimes: Lifetimes, tensors: NamedTensor[], partial: boolean, t: number): Named {
  let matched = 0;
  let added = 0;
  let unknown = 0;
  const sorted = blocks.slotsByAddress();
  for (const x of tensors) {
    // "other" from the agent means "found, not known" (a scan): it names, it does not classify.
    const cat = x.category !== undefined && x.category !== null && x.category !== "other" ? categoryCode(x.category) : -1;
    const name = typeof x.name === "string" ? x.name : undefined;
    const slot = blocks.containing(sorted, x.address);
    const info = { shape: Array.isArray(x.shape) ? x.shape.map(Number) : null, dtype: typeof x.dtype === "string" ? x.dtype : null, carried: false };
    if (slot >= 0) {
      // Several tensors can share a block (views, flat buffers): the first name the agent gave
      // stays (one carried from an earlier step gives way), a known category wins over "other".
      const first = blocks.names[slot] === undefined || blocks.tensors[slot]?.carried;
      lifetimes.name(slot, cat, first ? name : undefined, info);
      matched++;
    } else if (partial && x.size > 0) {
      blocks.tensors[blocks.addResynced(x.address, x.size, cat >= 0 ? cat : 0, name, t)] = info;
      added++;
    } else unknown++;
  }
  return { matched, added, unknown };
}
