// The seed of an attach (docs/protocol.md, "The seed"): what the caching allocator held when the
// agent was attached to a running program, so that block detail is whole from the attach on. The
// agent takes torch.cuda.memory_snapshot() bracketed by the stream and ties it, per device, to a
// count of that device's alloc and free_requested records: the seed holds the allocator's state
// right after the `events`-th of them. The model applies it exactly there (model.ts): the blocks
// its records made keep their phase, step and category, the blocks from before the attach come in
// with their size, address and segment, and nothing is counted twice or lost.

import { segmentPoolKey } from "./pools";
import { BEFORE_ATTACH, type BlockTable, RESYNCED_STEP } from "./blocks";
import { CAT_OTHER } from "./categories";
import type { SegmentTable } from "./segment-table";

/** A seed file larger than this is refused (a million blocks is far beyond a real program's). */
export const MAX_SEED_BYTES = 128 * 1024 ** 2;

export interface SeedBlock {
  address: number;
  size: number;
  /** What the program asked for (torch's requested_bytes counts these); absent in older snapshots. */
  requested_size?: number;
  /** "active_allocated" or "active_pending_free" (freed, its stream uses not done). */
  state: string;
  /** Its stack in the model's stacks (SEED_STACK_BASE + the seed's id), where torch recorded the
   *  block's frames (memory history on before the attach); absent otherwise. */
  stack?: number;
}

export interface SeedSegment {
  address: number;
  total_size: number;
  stream?: number;
  is_expandable?: boolean;
  /** Its pool ((0, 0): the default pool; absent from seeds of agents before pools were carried). */
  segment_pool_id?: unknown;
  blocks: SeedBlock[];
}

export interface SeedDevice {
  device: number;
  /** The device's alloc and free_requested records before the seed's point (from the attach). */
  events: number;
  segments: SeedSegment[];
  /** torch's max_memory_allocated() and max_memory_reserved(), read right after the snapshot:
   *  peaks from before the attach, which no block shows (absent from an older agent's seed). */
  peak_allocated?: number;
  peak_reserved?: number;
}

export interface Seed {
  version: number;
  unix_ns: number;
  /** The ring position (every lane) read before the snapshot: for information. */
  write_index?: number;
  devices: SeedDevice[];
  /** The blocks' stacks by the seed's id, frames [file, line, function] innermost first (blocks'
   *  `stack` is SEED_STACK_BASE + that id); empty where torch recorded no history before the attach. */
  stacks?: Record<string, [string, number, string][]>;
}

/** Where a seed's stack ids begin among the model's: above any id the hook gives (it counts from 1). */
export const SEED_STACK_BASE = 2 ** 31;
/** Frames a seed's stack may have (the agent keeps 64). */
const MAX_SEED_FRAMES = 256;

const isFrame = (f: unknown): f is [string, number, string] => Array.isArray(f) && f.length === 3 && typeof f[0] === "string" && typeof f[1] === "number" && Number.isInteger(f[1]) && typeof f[2] === "string";

/** A seed's `stacks`, checked: a clear one-line error for anything else. */
function parseStacks(raw: unknown, what: string): NonNullable<Seed["stacks"]> {
  if (raw === undefined) return {};
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Error(`${what}: "stacks" must be an object of id → frames`);
  for (const [id, frames] of Object.entries(raw)) {
    const k = Number(id);
    if (!Number.isInteger(k) || k < 1 || k >= SEED_STACK_BASE) throw new Error(`${what}: stacks: "${id}" is not an id from 1 to ${SEED_STACK_BASE - 1}`);
    if (!Array.isArray(frames) || frames.length > MAX_SEED_FRAMES || !frames.every(isFrame)) throw new Error(`${what}: stacks["${id}"] must be at most ${MAX_SEED_FRAMES} frames [file, line, function]`);
  }
  return raw as NonNullable<Seed["stacks"]>;
}

/** What became of the seed, for the views. */
export interface SeedStatus {
  state: "pending" | "applied" | "refused";
  /** Why it was refused, in words (null otherwise). */
  reason: string | null;
  /** Blocks from before the attach that the seed added, and their bytes (applied devices). */
  blocks: number;
  bytes: number;
  /** Blocks the records had made that the seed kept. */
  kept: number;
}

const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

/** A seed file's text, checked: a clear one-line error for anything else. */
export function parseSeed(text: string, what = "the seed"): Seed {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not JSON: ${(e as Error).message}`);
  }
  const s = raw as Partial<Seed> | null;
  if (!s || typeof s !== "object" || s.version !== 1) throw new Error(`${what} is not a version 1 seed`);
  if (!Array.isArray(s.devices)) throw new Error(`${what} has no "devices" list`);
  const stacks = parseStacks(s.stacks, what);
  s.devices.forEach((d, i) => {
    const at = `${what}: devices[${i}]`;
    if (!d || !isCount(d.device) || d.device >= 16) throw new Error(`${at}: "device" must be 0..15`);
    if (!isCount(d.events)) throw new Error(`${at}: "events" must be a non-negative integer`);
    if (!Array.isArray(d.segments)) throw new Error(`${at}: "segments" must be a list`);
    for (const k of ["peak_allocated", "peak_reserved"] as const) if (d[k] !== undefined && !isCount(d[k])) throw new Error(`${at}: "${k}" must be a non-negative integer`);
    d.segments.forEach((g, j) => {
      if (!g || !isCount(g.address) || !isCount(g.total_size) || !Array.isArray(g.blocks))
        throw new Error(`${at}.segments[${j}]: a segment needs numeric address and total_size and a blocks list`);
      g.blocks.forEach((b, k) => {
        if (!b || !isCount(b.address) || !isCount(b.size) || typeof b.state !== "string" || (b.requested_size !== undefined && !isCount(b.requested_size)))
          throw new Error(`${at}.segments[${j}].blocks[${k}]: a block needs numeric address and size and a state`);
        if (b.stack !== undefined && !(isCount(b.stack) && String(b.stack) in stacks)) throw new Error(`${at}.segments[${j}].blocks[${k}]: its stack ${JSON.stringify(b.stack)} is not one of the seed's stacks`);
      });
    });
  });
  // The blocks' stack ids into the model's (the seed's own count from 1, as the hook's do).
  for (const d of s.devices) for (const g of d.segments) for (const b of g.blocks) if (b.stack !== undefined) b.stack += SEED_STACK_BASE;
  return { version: 1, unix_ns: typeof s.unix_ns === "number" ? s.unix_ns : 0, write_index: s.write_index, devices: s.devices, stacks };
}

export interface Seeded {
  kept: number;
  added: number;
  addedBytes: number;
  /** Blocks the records held that the seed says are not allocated (records lost: never when exact). */
  dropped: number;
  /** Kept blocks whose size the seed corrected (a large block holds more than its request). */
  resized: number;
  reserved: number;
  active: number;
  /** torch's requested bytes per the seed, or null where its blocks do not say. */
  requested: number | null;
}

/** Make `blocks` and `segments` the seed's state. `leaving(slot)` runs for a block that goes. */
export function seedBlocks(blocks: BlockTable, segments: SegmentTable, seed: readonly SeedSegment[], t: number, leaving: (slot: number) => void): Seeded {
  const reserved = segments.replace(seed.map((g) => ({ address: g.address, size: g.total_size, stream: g.stream ?? 0, pool: segmentPoolKey(g.segment_pool_id) })));
  const want = new Map<number, { size: number; stream: number; stack: number }>();
  let active = 0;
  let requested: number | null = 0;
  for (const g of seed)
    for (const b of g.blocks) {
      if (b.state === "active_allocated") {
        want.set(b.address, { size: b.size, stream: g.stream ?? 0, stack: b.stack ?? 0 });
        requested = requested === null || b.requested_size === undefined ? null : requested + b.requested_size;
      }
      if (b.state === "active_allocated" || b.state === "active_pending_free") active += b.size;
    }
  let kept = 0;
  let dropped = 0;
  let resized = 0;
  for (const slot of blocks.bySlot.values()) {
    const w = want.get(blocks.address[slot]!);
    if (w === undefined) {
      leaving(slot);
      blocks.forget(slot);
      dropped++;
      continue;
    }
    want.delete(blocks.address[slot]!);
    kept++;
    if (w.size !== blocks.size[slot]) {
      blocks.resize(slot, w.size);
      resized++;
    }
  }
  let addedBytes = 0;
  for (const [address, w] of want) {
    blocks.add(address, w.size, w.stream, t, 0, RESYNCED_STEP, 0, 0, CAT_OTHER, BEFORE_ATTACH, w.stack);
    addedBytes += w.size;
  }
  return { kept, added: want.size, addedBytes, dropped, resized, reserved, active, requested };
}
