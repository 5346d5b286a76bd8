// Where a finding's memory was allocated: the phase, record_function range and, where the model
// knows where blocks were allocated (a snapshot's stacks), the user's line (user-frame.ts) of the
// live blocks it is about. Pure queries over the model's live blocks.

import { PHASE_NAMES } from "../ffi/events";
import { RESYNCED_STEP } from "./blocks";
import { LARGE_REMAINDER } from "./consistency";
import type { DeviceState } from "./device";
import type { ProfilerModel } from "./model";
import { citedLine, LineSums, type LineBytes, type LineSplit } from "./line-bytes";
import { formatBytes, inPhase } from "../words";

/**
 * Size classes of large blocks: each size → the smallest size within LARGE_REMAINDER below it, in
 * a chain from the smallest. One request's blocks are torch's, not its request rounded: the
 * allocator keeps a large free block whole where a split would leave 1 MiB or less, so the same
 * tensor kept each step holds anything from its request rounded to 1 MiB more (hf-gpt2-leak's
 * 1,608,224-byte logits: blocks of 1,608,704, 1,765,376, 2,097,152 and 2,585,600 bytes).
 */
function sizeClasses(sizes: Iterable<number>): Map<number, number> {
  const out = new Map<number, number>();
  let start = -Infinity;
  for (const s of [...new Set(sizes)].sort((x, y) => x - y)) {
    if (s <= LARGE_REMAINDER || s > start + LARGE_REMAINDER) start = s;
    out.set(s, start);
  }
  return out;
}

/**
 * Where the growing memory was allocated: the phase and range of the live blocks of the growing
 * category that later steps allocated and still hold (a leak's tensors, step after step), by bytes.
 * Outside every record_function range is a place too: a list the training loop appends to. Only
 * blocks of a kind that more than one step left behind count (the same place and stack, or size
 * class where no stack is known): the last step's own output, still referenced, is not the growth.
 */
export function growthSite(m: ProfilerModel, d: DeviceState, sinceStep: number, cat: number) {
  const b = d.blocks;
  const candidates: number[] = [];
  for (const slot of b.bySlot.values()) if (b.category[slot] === cat && b.step[slot]! > sinceStep && b.step[slot] !== RESYNCED_STEP) candidates.push(slot);
  const sizeClass = sizeClasses(candidates.map((slot) => b.size[slot]!));
  // The candidates by kind, and the kinds found in more than one step.
  const kinds = new Map<string, { firstStep: number; recurring: boolean; slots: number[] }>();
  for (const slot of candidates) {
    const kind = `${b.phase[slot]}:${b.range[slot]}:${b.stack[slot] ? `s${b.stack[slot]}` : sizeClass.get(b.size[slot]!)}`;
    const k = kinds.get(kind);
    if (!k) kinds.set(kind, { firstStep: b.step[slot]!, recurring: false, slots: [slot] });
    else {
      k.slots.push(slot);
      if (k.firstStep !== b.step[slot]) k.recurring = true;
    }
  }
  const held = new Set([...kinds.values()].filter((k) => k.recurring).flatMap((k) => k.slots));
  const bytes = new Map<number, { bytes: number; blocks: number }>();
  for (const slot of b.bySlot.values()) {
    if (!held.has(slot)) continue;
    const key = b.phase[slot]! * 2 ** 32 + b.range[slot]!;
    const e = bytes.get(key) ?? { bytes: 0, blocks: 0 };
    e.bytes += b.size[slot]!;
    e.blocks++;
    bytes.set(key, e);
  }
  let top: [number, { bytes: number; blocks: number }] | null = null;
  for (const e of bytes) if (!top || e[1].bytes > top[1].bytes) top = e;
  if (!top) return null;
  const phase = PHASE_NAMES[Math.floor(top[0] / 2 ** 32)] ?? "other";
  const rangeId = top[0] % 2 ** 32;
  const range = rangeId > 0 ? m.rangeName(rangeId) : null;
  const frame = siteFrame(m, d, (slot) => held.has(slot) && b.phase[slot]! * 2 ** 32 + b.range[slot]! === top[0]);
  const at = frame ? `, at ${frame.label}` : "";
  const where = `${inPhase(phase)}, ${range ? `in range ${range}` : "outside every record_function range"}${at}`;
  return { phase, range, frame: frame?.label ?? null, frameShort: frame?.short ?? null, frameBytes: frame?.bytes ?? null, frameBlocks: frame?.blocks ?? null, bytes: top[1].bytes, blocks: top[1].blocks, words: `the ${top[1].blocks} blocks still held (${formatBytes(top[1].bytes)}) were allocated ${where}` };
}

/** The live blocks `pick` keeps by the user's line that allocated them (line-bytes.ts), where
 *  the model knows where blocks were allocated (a snapshot's stacks, the hook's); null elsewhere. */
export function siteLines(m: ProfilerModel, d: DeviceState, pick: (slot: number) => boolean, limit = 8): LineSplit | null {
  const stacks = m.stacks;
  if (!stacks) return null;
  const b = d.blocks;
  const sums = new LineSums(m);
  for (const slot of b.bySlot.values()) if (pick(slot)) sums.add(b.stack[slot] || stacks.stackOf(d.device, b.address[slot]!), b.size[slot]!);
  return sums.split(limit);
}

/** The user's line that allocated most of the live blocks `pick` keeps, where it holds most of
 *  their bytes (line-bytes.ts: citedLine); null where it is not known well enough to name. */
export function siteFrame(m: ProfilerModel, d: DeviceState, pick: (slot: number) => boolean): LineBytes | null {
  const split = siteLines(m, d, pick);
  return split && citedLine(split);
}
