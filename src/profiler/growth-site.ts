// Where a growth's memory was allocated: the phase, record_function range and, where the model
// knows where blocks were allocated (a snapshot's stacks, the hook's), the user's line
// (user-frame.ts) of the blocks held at a step boundary. Pure queries over the model's blocks.

import { PHASE_NAMES } from "../ffi/events";
import { RESYNCED_STEP } from "./blocks";
import { PeakBlocks } from "./at-peak";
import { LARGE_REMAINDER } from "./consistency";
import type { DeviceState } from "./device";
import type { ProfilerModel } from "./model";
import type { StepRecord } from "./steps";
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

const endOf = new WeakMap<DeviceState, { rec: StepRecord; blocks: PeakBlocks }>();

/**
 * The blocks held at the end of step `step`: the model's picture of that boundary (at-peak.ts: the
 * live blocks born by then and the ones freed since), so that what a growth of memory held at step
 * boundaries is made of is read at a boundary, not now. A program drops what it kept once its
 * training function returns, before it exits (its last document then had none of the kept blocks
 * live, and the growth named no line). The live blocks now where that boundary's picture is no
 * longer kept (older than the last PEAK_STEPS_KEPT steps).
 */
function heldAtEnd(d: DeviceState, step: number): PeakBlocks {
  // A finished step's end does not change (its blocks freed since join the log of frees): put
  // together once for the step's record, not at each tick's findings.
  const rec = d.steps.findLast((r) => r.step === step);
  const had = endOf.get(d);
  if (had && rec && had.rec === rec) return had.blocks;
  const pic = d.peaks.picture(d.cur, step, d.categoryCode, true);
  if (pic) {
    if (rec) endOf.set(d, { rec, blocks: pic.blocks });
    return pic.blocks;
  }
  const b = d.blocks;
  const out = new PeakBlocks(b.count);
  for (const slot of b.bySlot.values()) out.push(b, slot, b.category[slot]!, NaN);
  return out;
}

/**
 * Where the growing memory was allocated: the phase and range of the blocks of the growing category
 * that steps after `sinceStep` allocated and that were still held at the end of step `atStep` (a
 * leak's tensors, step after step). Outside every record_function range is a place too: a list the
 * training loop appends to. Only blocks of a kind that more than one step left behind count (the
 * same place and stack, or size class where no stack is known): the last step's own output, still
 * referenced, is not the growth.
 */
export function growthSite(m: ProfilerModel, d: DeviceState, sinceStep: number, cat: number, atStep: number) {
  const b = heldAtEnd(d, atStep);
  const candidates: number[] = [];
  for (let i = 0; i < b.n; i++) if (b.category[i] === cat && b.step[i]! > sinceStep && b.step[i] !== RESYNCED_STEP) candidates.push(i);
  const sizeClass = sizeClasses(candidates.map((i) => b.size[i]!));
  // The candidates by kind, and the kinds found in more than one step.
  const kinds = new Map<string, { firstStep: number; recurring: boolean; rows: number[] }>();
  for (const i of candidates) {
    const kind = `${b.phase[i]}:${b.range[i]}:${b.stack[i] ? `s${b.stack[i]}` : sizeClass.get(b.size[i]!)}`;
    const k = kinds.get(kind);
    if (!k) kinds.set(kind, { firstStep: b.step[i]!, recurring: false, rows: [i] });
    else {
      k.rows.push(i);
      if (k.firstStep !== b.step[i]) k.recurring = true;
    }
  }
  const held = new Set([...kinds.values()].filter((k) => k.recurring).flatMap((k) => k.rows));
  const bytes = new Map<number, { bytes: number; blocks: number }>();
  for (const i of held) {
    const key = b.phase[i]! * 2 ** 32 + b.range[i]!;
    const e = bytes.get(key) ?? { bytes: 0, blocks: 0 };
    e.bytes += b.size[i]!;
    e.blocks++;
    bytes.set(key, e);
  }
  let top: [number, { bytes: number; blocks: number }] | null = null;
  for (const e of bytes) if (!top || e[1].bytes > top[1].bytes) top = e;
  if (!top) return null;
  const phase = PHASE_NAMES[Math.floor(top[0] / 2 ** 32)] ?? "other";
  const rangeId = top[0] % 2 ** 32;
  const range = rangeId > 0 ? m.rangeName(rangeId) : null;
  const frame = siteFrame(m, d.device, b, (i) => held.has(i) && b.phase[i]! * 2 ** 32 + b.range[i]! === top[0]);
  const at = frame ? `, at ${frame.label}` : "";
  const where = `${inPhase(phase)}, ${range ? `in range ${range}` : "outside every record_function range"}${at}`;
  return { phase, range, frame: frame?.label ?? null, frameShort: frame?.short ?? null, frameBytes: frame?.bytes ?? null, frameBlocks: frame?.blocks ?? null, bytes: top[1].bytes, blocks: top[1].blocks, words: `the ${top[1].blocks} blocks still held (${formatBytes(top[1].bytes)}) were allocated ${where}` };
}

/** The blocks `pick` keeps of `rows` (of device `device`) by the user's line that allocated them
 *  (line-bytes.ts), where the model knows where blocks were allocated (a snapshot's stacks, the
 *  hook's); null elsewhere. */
function siteLines(m: ProfilerModel, device: number, rows: PeakBlocks, pick: (row: number) => boolean, limit = 8): LineSplit | null {
  const stacks = m.stacks;
  if (!stacks) return null;
  const sums = new LineSums(m);
  for (let i = 0; i < rows.n; i++) if (pick(i)) sums.add(rows.stack[i] || stacks.stackOf(device, rows.address[i]!), rows.size[i]!);
  return sums.split(limit);
}

/** The user's line that allocated most of the blocks `pick` keeps, where it holds most of their
 *  bytes (line-bytes.ts: citedLine); null where it is not known well enough to name. */
function siteFrame(m: ProfilerModel, device: number, rows: PeakBlocks, pick: (row: number) => boolean): LineBytes | null {
  const split = siteLines(m, device, rows, pick);
  return split && citedLine(split);
}
