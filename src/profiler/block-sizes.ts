// The block the caching allocator handed out for each request of a snapshot's trace. A trace
// entry carries the size the program asked for; torch.cuda.memory_allocated() counts blocks, and
// a block can be larger than the request rounded:
//   - the request is rounded (round_size: to 512 bytes, or to power-of-two divisions where
//     roundup_power2_divisions is set);
//   - a small-pool block (≤ 1 MiB, kSmallSize) is always cut to that size, and so is every block
//     under expandable segments: a free block is split whenever 512 bytes or more remain;
//   - a large-pool block is split only when more than 1 MiB remains (and only for requests below
//     max_split_size): otherwise the request takes the whole free block, up to 1 MiB more.
// So only large-pool blocks need the segment's layout: which free block the address starts and
// how long it is (large-pool.ts follows it). This file: the rules, from the snapshot's settings.
// Pure: no I/O.

/** The allocator's constants (c10/cuda/CUDACachingAllocator.cpp). */
export const MIN_BLOCK = 512; // kMinBlockSize
export const SMALL_SIZE = 1024 * 1024; // kSmallSize: requests up to it come from the small pool
export const SMALL_BUFFER = 2 * 1024 * 1024; // kSmallBuffer: the small pool's segments

export interface AllocatorRules {
  /** expandable_segments: every pool splits a free block when 512 bytes or more remain. */
  expandable: boolean;
  /** max_split_size: blocks for requests at or above it are never split (Infinity: no limit). */
  maxSplitSize: number;
  /** roundup_power2_divisions by interval (1 MiB, 2 MiB, … 32 GiB and above); 0 or 1: none. */
  divisions: number[];
  /** Some interval rounds to power-of-two divisions (else every request rounds to 512 bytes). */
  powerTwo: boolean;
}

export const DEFAULT_RULES: AllocatorRules = Object.freeze({ expandable: false, maxSplitSize: Infinity, divisions: new Array<number>(16).fill(0), powerTwo: false });

/**
 * The rules a snapshot's `allocator_settings` state (torch ≥ 2.1 writes them), or the defaults.
 * Expandable segments also show as segment_map entries or segments marked is_expandable, for a
 * snapshot without settings.
 */
export function rulesOf(settings: unknown, expandableSeen: boolean): AllocatorRules {
  const s = settings && typeof settings === "object" && !Array.isArray(settings) ? (settings as Record<string, unknown>) : {};
  const split = typeof s.max_split_size === "number" && s.max_split_size > 0 ? s.max_split_size : Infinity;
  const divisions = new Array<number>(16).fill(0);
  const d = s.roundup_power2_divisions;
  if (d && typeof d === "object" && !Array.isArray(d)) {
    // keyed by the interval's start in MiB: "1", "2", "4", … "32768"
    for (const [k, v] of Object.entries(d as Record<string, unknown>)) {
      const mib = Number(k);
      const at = Math.log2(mib);
      if (Number.isInteger(at) && at >= 0 && at < 16 && typeof v === "number" && v >= 0) divisions[at] = v;
    }
  } else if (typeof d === "number" && d >= 0) divisions.fill(d);
  return { expandable: s.expandable_segments === true || expandableSeen, maxSplitSize: split, divisions, powerTwo: divisions.some((x) => x > 1) };
}

/** floor(log2(n)) for n ≥ 1 up to 2^53. */
function log2Floor(n: number): number {
  return n < 4294967296 ? 31 - Math.clz32(n) : 32 + (31 - Math.clz32(Math.floor(n / 4294967296)));
}

/** round_size: the block a request needs before any split decision. 0 stays 0 (no block). */
export function roundSize(request: number, rules: AllocatorRules): number {
  if (request <= 0) return 0;
  if (request < MIN_BLOCK) return MIN_BLOCK;
  const plain = Math.ceil(request / MIN_BLOCK) * MIN_BLOCK;
  if (!rules.powerTwo) return plain;
  const log = log2Floor(request);
  const divisions = rules.divisions[Math.min(15, Math.max(0, log - 20))]!;
  if (divisions <= 1 || request <= MIN_BLOCK * divisions) return plain;
  // the next of `divisions` equal steps between the powers of two around the request
  const floor = 2 ** log;
  if (floor === request) return request;
  const step = floor / 2 ** log2Floor(divisions);
  if (step < 1) return floor * 2;
  return Math.ceil(request / step) * step;
}

/** The block a request rounded to `rounded` gets from a large-pool free block of `free` bytes
 *  (free ≥ rounded): the whole free block, unless more than 1 MiB would remain and the request is
 *  below max_split_size, when it is cut to the request. (The small pool and expandable segments
 *  always cut: they need no chain.) */
export function blockFrom(free: number, rounded: number, maxSplitSize: number): number {
  return rounded < maxSplitSize && free - rounded > SMALL_SIZE ? rounded : free;
}

/**
 * The allocator's settings as PYTORCH_ALLOC_CONF (torch ≥ 2.9) or PYTORCH_CUDA_ALLOC_CONF state
 * them ("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]"),
 * in the form a snapshot's `allocator_settings` has them, for rulesOf: one reading of the rules
 * for snapshots and rings. Keys this model does not need are left out; a value it cannot read
 * leaves that setting at torch's default (the allocator refuses such a string at its start).
 */
export function settingsOfAllocConf(conf: string | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!conf) return out;
  // split at commas outside brackets: a list of divisions has its own commas
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= conf.length; i++) {
    const c = conf[i];
    if (c === "[") depth++;
    else if (c === "]") depth--;
    else if ((c === "," && depth === 0) || i === conf.length) {
      parts.push(conf.slice(start, i).trim());
      start = i + 1;
    }
  }
  for (const part of parts) {
    const at = part.indexOf(":");
    if (at < 0) continue;
    const key = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (key === "expandable_segments") out.expandable_segments = value === "True" || value === "true";
    else if (key === "max_split_size_mb") {
      const mb = Number(value);
      if (Number.isFinite(mb) && mb > 0) out.max_split_size = mb * 1024 * 1024;
    } else if (key === "roundup_power2_divisions") out.roundup_power2_divisions = divisionsOf(value);
  }
  return out;
}

/** roundup_power2_divisions' value: one number for every interval, or a list of `MiB:divisions`
 *  where the first also holds below it and `>` holds above the last (keyed by MiB, as a snapshot's
 *  allocator_settings key them). */
function divisionsOf(value: string): number | Record<string, number> | undefined {
  if (!value.startsWith("[")) {
    const n = Number(value);
    return Number.isInteger(n) && n >= 0 ? n : undefined;
  }
  const byMib: Record<string, number> = {};
  let first = true;
  let last = -1;
  for (const item of value.slice(1, -1).split(",")) {
    const [k, v] = item.split(":").map((s) => s.trim());
    const d = Number(v);
    if (!k || !Number.isInteger(d) || d < 0) continue;
    if (k === ">") {
      for (let at = last + 1; at < 16; at++) byMib[String(2 ** at)] = d;
      continue;
    }
    const mib = Number(k);
    if (!(mib >= 1)) continue;
    const at = Math.min(15, Math.floor(Math.log2(mib)));
    if (first) for (let below = 0; below < at; below++) byMib[String(2 ** below)] = d;
    first = false;
    byMib[String(2 ** at)] = d;
    last = at;
  }
  return byMib;
}
