// One step of one device through time, block by block, as memory_viz's Active Memory Timeline
// draws it: each block a band from its allocation to its free (or to the step's end while it is
// still alive), the largest as bands of their own, the others summed per column of time, what was
// held from earlier steps as one band, and beneath them the phase and the record_function range
// of each column. Pure: the model's kept records (model.keepTrace) and block table in, plain
// numbers out. The work is one pass over the records of that step (found by a binary search over
// the kept records, whose times ascend: the reader merges the ring's lanes by time) and one walk
// over the live blocks; nothing is invented where the kept records do not reach back to the step's
// start: the result says from when it knows (`partial`, `from_us`).

import { PHASE, PHASE_NAMES } from "../ffi/events";
import type { ProfilerModel } from "./model";
import { BEFORE_ATTACH, RESYNCED_STEP } from "./blocks";
import { CATEGORIES, survivorCategory } from "./categories";
import { blockLabel } from "./queries";
import { columnOf, readWindow, type WindowBlock } from "./step-window";
import type { StepRecord } from "./steps";
import { ParamSizes } from "./param-sizes";
import { frameLabel } from "./user-frame";

/** Bands a result holds unless asked for another number. */
export const DEFAULT_BANDS = 12;
/** The largest blocks of the "held from earlier steps" band that a result names. */
export const HELD_LISTED = 8;

/** One block through the step. */
export interface StepBand {
  address: number;
  size_bytes: number;
  stream: number | null;
  /** When it was allocated; null: before the window (an earlier step, or before the kept records). */
  alloc_us: number | null;
  /** When the program freed it (free_requested); null: alive at the window's end. */
  free_us: number | null;
  /** Its span in the window: [from_us, to_us). */
  from_us: number;
  to_us: number;
  /** The step, phase and range it was allocated in (null where its allocation was not seen). */
  step: number | null;
  phase: string | null;
  range: number;
  range_name: string | null;
  /** The phase and range it was freed in (null: not freed in the window). */
  freed_phase: string | null;
  freed_range_name: string | null;
  /** Still alive now (the block table holds it): its name and category are the model's. */
  alive_now: boolean;
  name: string | null;
  shape: number[] | null;
  dtype: string | null;
  /** The model's category for a live block; for a freed one, what its lifetime says ("temporary":
   *  freed in the phase that made it); null where nothing says. */
  category: string | null;
  /** What a view shows: its name, else what is known of it, never a bare address. */
  label: string;
  /** The line of the user's code that allocated it ("path/train.py:42 step"), where its stack is
   *  known (the hook's or a snapshot's); null otherwise (no stack, allocated before the window). */
  line: string | null;
  /** Bytes × µs alive in the window: what ranks the bands. */
  byte_us: number;
}

/** A block of the "held from earlier steps" band, still alive now (from the block table). */
export interface HeldBlock {
  address: number;
  size_bytes: number;
  time_us: number;
  label: string;
  category: string;
}

export interface StepBands {
  device: number;
  step: number;
  /** The step still running: its window ends at its last record so far. */
  running: boolean;
  start_us: number;
  end_us: number;
  /** The kept records do not reach back to the step's start: what the window shows begins at
   *  `from_us` (the oldest record kept), and the held band is what was alive then. */
  partial: boolean;
  from_us: number;
  /** Why the figures may be incomplete, in words (empty when whole). */
  notes: string[];
  columns: number;
  column_us: number;
  /** Blocks alive across the whole window and allocated before it, as one band. */
  held: {
    /** "held from earlier steps", or "held from before the kept records" where partial. */
    label: string;
    bytes: number;
    /** The largest of them still alive now, and all of those added up (the rest of `bytes` was
     *  freed after the window). */
    largest: HeldBlock[];
    alive_now_blocks: number;
    alive_now_bytes: number;
  };
  /** The largest blocks, in order of allocation. */
  bands: StepBand[];
  /** Per column: bytes of the other blocks alive at the column's end (null: a column that ends
   *  before the kept records begin). */
  rest_bytes: (number | null)[];
  /** Blocks summed in rest_bytes. */
  rest_blocks: number;
  /** Per column: allocated at its end (held + bands alive + rest), and the most within it (null
   *  as in rest_bytes). */
  allocated_bytes: (number | null)[];
  allocated_max_bytes: (number | null)[];
  /** Per column: the phase with the most of the device's records in it (PHASE_NAMES; "other" is
   *  outside forward, backward and the optimizer); a column without a record takes the phase in
   *  effect. Null before the window's first record. */
  phase: (string | null)[];
  /** Per column: the innermost record_function range the same way (null: none open). */
  range: (string | null)[];
  /** The most allocated at once in the window, and when. */
  peak_bytes: number;
  peak_us: number;
  /** Records of the device read in the window. */
  records: number;
}

export interface StepBandsOptions {
  device?: number;
  /** A kept step or the running one, by number (default: the last complete step, else the running one). */
  step?: number;
  columns: number;
  bands?: number;
}

/** The steps a timeline can show: kept steps the kept records reach into, and the running one. */
export function timelineSteps(m: ProfilerModel, device?: number): { steps: number[]; running: number } | null {
  const d = device === undefined ? m.devices[0] : m.device(device);
  const t = m.tail;
  if (!d || !t || t.total === t.first || d.cur.start_us !== d.cur.start_us) return null;
  const oldest = t.time_us[t.slot(t.first)]!;
  return { steps: d.steps.filter((s) => s.end_us > oldest).map((s) => s.step), running: d.cur.step };
}

const phaseName = (p: number): string => PHASE_NAMES[p] ?? `phase#${p}`;

/**
 * What a freed block's lifetime says of it, by the model's rule (lifetimes.ts): freed in the phase
 * instance that made it, a temporary; past forward (or past the loss, outside any phase right
 * before backward), an activation; past the optimizer, optimizer state; past backward, a gradient
 * where a parameter of its size is alive, else a cache the backward pass made (other). `next`: the
 * phase after the one it was allocated in (−1: not seen); `paramSizes`: the live parameters' sizes.
 */
function lifetimeCategory(phase: number, next: number, sameInstance: boolean, size: number, paramSizes: ParamSizes): string | null {
  if (sameInstance) return "temporary";
  // The two cases lifetimes.ts adds to the phase's survivor rule (categories.ts): the loss, made
  // outside any phase right before backward, and what outlives backward without a parameter's size.
  if (phase === PHASE.other && next === PHASE.backward) return "activation";
  if (phase === PHASE.backward) return paramSizes.size === 0 ? null : paramSizes.fits(size) ? "gradient" : "other";
  if (phase === PHASE.other && next < 0) return null;
  return CATEGORIES[survivorCategory(phase)] ?? null;
}

/**
 * One step of one device through time (see the file's head). Null where the model has no such
 * device, keeps no records (model.keepTrace), or the device has not begun a step.
 */
export function stepBands(m: ProfilerModel, opts: StepBandsOptions): StepBands | null {
  const columns = Math.floor(opts.columns);
  if (!(columns >= 1)) throw new RangeError(`columns must be at least 1, got ${opts.columns}`);
  const nBands = opts.bands ?? DEFAULT_BANDS;
  if (!Number.isInteger(nBands) || nBands < 0) throw new RangeError(`bands must be a non-negative integer, got ${opts.bands}`);
  const d = opts.device === undefined ? m.devices[0] : m.device(opts.device);
  const t = m.tail;
  if (!d || !t || d.cur.start_us !== d.cur.start_us) return null;
  const kept = d.steps;
  let rec: StepRecord | undefined;
  let running: boolean;
  if (opts.step === undefined || opts.step === d.cur.step) {
    rec = opts.step === undefined ? (kept.at(-1) ?? d.cur) : d.cur;
    running = rec === d.cur;
  } else {
    for (let i = kept.length - 1; i >= 0 && !rec; i--) if (kept[i]!.step === opts.step) rec = kept[i];
    if (!rec) throw new RangeError(`step ${opts.step} is not kept for device ${d.device} (kept: ${kept.length ? `${kept[0]!.step}…${kept.at(-1)!.step}` : "none"}; running: ${d.cur.step})`);
    running = false;
  }
  const step = rec.step;
  const dev = d.device;
  const first = t.first;
  const lastUs = t.total > first ? t.time_us[t.slot(t.total - 1)]! : rec.start_us;
  // The window: the step record's start and end (the running step: to its last record so far).
  const start = rec.start_us;
  const end = running ? Math.max(start, lastUs) : rec.end_us;
  const colUs = Math.max(1, end - start) / columns;

  const oldestUs = t.total > first ? t.time_us[t.slot(first)]! : end;
  const partial = oldestUs > start || t.total === first;
  const fromUs = partial ? Math.min(end, oldestUs) : start;
  const notes: string[] = [];
  if (partial) notes.push(`the kept records (the newest ${t.capacity.toLocaleString("en-US")}) begin ${((fromUs - start) / 1000).toFixed(1)} ms into the step`);
  if (rec.partial) notes.push("records were lost during the step, or it freed blocks the monitor never saw allocated: its figures may be short");

  const w = readWindow(m, { device: dev, step, running, start, end, fromUs, columns });
  const { alloc, earlierFreed, nextPhase, blocks: list } = w;
  // Where the window began in bytes: the step record's at its start; where the kept records begin
  // later, what the end (the step record's, or the device's now) less the window's changes leaves.
  const endBytes = running ? d.allocated : rec.allocated_at_end;
  const base = partial ? endBytes - alloc : rec.allocated_at_start;
  const heldBytes = base - earlierFreed;
  // Columns that end before the kept records begin are not known.
  const knownFrom = partial ? columnOf(start, end, columns)(fromUs) : 0;
  const known = <T>(c: number, v: T): T | null => (c < knownFrom ? null : v);

  // The bands: the largest by bytes × time alive, the area each takes in the picture. Size alone
  // would give rows to blocks that live for an instant (a large scratch buffer) and leave the
  // activations that make the step's shape in the summed row; those short-lived ones still count
  // in every column's figures, in the rest.
  const weight = (b: WindowBlock) => b.size * Math.max(0, b.to - b.from);
  const order = [...list].sort((x, y) => weight(y) - weight(x) || y.size - x.size || x.from - y.from);
  const chosen = order.slice(0, nBands).sort((x, y) => x.from - y.from || x.address - y.address);
  // The rest: each block adds its size to the columns whose end it is alive at.
  const diff = new Float64Array(columns + 1);
  for (const b of order.slice(nBands)) {
    diff[b.colFrom]! += b.size;
    diff[b.colTo]! -= b.size;
  }
  const restBlocks = Math.max(0, list.length - nBands);
  const rest: (number | null)[] = [];
  let run = 0;
  for (let c = 0; c < columns; c++) rest.push(known(c, (run += diff[c]!)));

  const blocks = d.blocks;
  const rangeName = (id: number) => m.rangeName(id);
  // The held band's blocks the table still has: allocated before the window, alive since.
  const held: HeldBlock[] = [];
  let aliveBlocks = 0;
  let aliveBytes = 0;
  const paramSizes = new ParamSizes();
  for (const slot of blocks.bySlot.values()) {
    const cat = d.categoryOf(slot);
    if (cat === "parameter") paramSizes.add(blocks.size[slot]!);
    if (!(blocks.time_us[slot]! < fromUs)) continue;
    aliveBlocks++;
    aliveBytes += blocks.size[slot]!;
    held.push({ address: blocks.address[slot]!, size_bytes: blocks.size[slot]!, time_us: blocks.time_us[slot]!, label: "", category: cat });
  }
  held.sort((x, y) => y.size_bytes - x.size_bytes || x.address - y.address);
  const largest = held.slice(0, HELD_LISTED).map((h) => {
    const slot = blocks.bySlot.get(h.address)!;
    const ph = phaseName(blocks.phase[slot]!);
    const unnamed = blocks.flags[slot] === BEFORE_ATTACH ? `(${h.category}, allocated before the attach)` : blockLabel(h.category, ph, rangeName(blocks.range[slot]!), blocks.step[slot] === RESYNCED_STEP ? null : blocks.step[slot]!);
    return { ...h, label: blocks.names[slot] ?? unnamed };
  });

  // Where each band was allocated: its alloc record's stack (a snapshot's trace gives it; a ring's
  // alloc carries it in `extra`), else the live block's.
  const stacks = m.stacks;
  const lineOf = (b: WindowBlock, slot: number): string | null => {
    if (!stacks) return null;
    const stack = b.rec >= 0 ? t.stack[b.rec]! || (m.recordStacks ? t.extra[b.rec]! : 0) : slot >= 0 ? blocks.stack[slot]! : 0;
    const k = stack ? stacks.userFrame(stack) : -1;
    return k < 0 ? null : frameLabel(stacks.frames(stack)[k]!);
  };
  const bands = chosen.map((b): StepBand => {
    const slot = b.alloc !== null && b.free === null ? (blocks.bySlot.get(b.address) ?? -1) : -1;
    const live = slot >= 0 && blocks.time_us[slot] === b.alloc && blocks.size[slot] === b.size;
    const seen = b.phase >= 0;
    const phase = seen ? phaseName(b.phase) : null;
    const rname = seen ? rangeName(b.range) : null;
    const next = b.free === null && running ? -1 : (nextPhase[b.inst] ?? -1);
    const category = live ? d.categoryOf(slot) : seen ? lifetimeCategory(b.phase, next, b.free !== null && b.fInst === b.inst, b.size, paramSizes) : null;
    const name = live ? (blocks.names[slot] ?? null) : null;
    const tensor = live ? blocks.tensors[slot] : undefined;
    const freedPhase = b.fPhase >= 0 ? phaseName(b.fPhase) : null;
    const freedRange = b.fPhase >= 0 ? rangeName(b.fRange) : null;
    const freedWhere = freedRange ? `in ${freedRange}` : freedPhase === "other" ? "outside the phases" : `in ${freedPhase}`;
    const label = name ?? (seen ? blockLabel(category ?? "block", phase!, rname, step) : `(from ${partial ? "before the kept records" : "an earlier step"}, freed ${freedWhere})`);
    return {
      address: b.address,
      size_bytes: b.size,
      stream: b.stream,
      alloc_us: b.alloc,
      free_us: b.free,
      from_us: b.from,
      to_us: b.to,
      step: seen ? step : null,
      phase,
      range: seen ? b.range : 0,
      range_name: rname,
      freed_phase: freedPhase,
      freed_range_name: freedRange,
      alive_now: live,
      name,
      shape: tensor?.shape ?? null,
      dtype: tensor?.dtype ?? null,
      category,
      label,
      line: lineOf(b, live ? slot : -1),
      byte_us: weight(b),
    };
  });

  return {
    device: dev,
    step,
    running,
    start_us: start,
    end_us: end,
    partial,
    from_us: fromUs,
    notes,
    columns,
    column_us: colUs,
    held: {
      label: partial ? "held from before the kept records" : "held from earlier steps",
      bytes: heldBytes,
      largest,
      alive_now_blocks: aliveBlocks,
      alive_now_bytes: aliveBytes,
    },
    bands,
    rest_bytes: rest,
    rest_blocks: restBlocks,
    allocated_bytes: w.allocated.map((v, c) => known(c, v + base)),
    allocated_max_bytes: w.allocatedMax.map((v, c) => known(c, v + base)),
    phase: Array.from(w.phase, (p) => (p >= 0 ? phaseName(p) : null)),
    range: Array.from(w.range, (r) => (r > 0 ? m.rangeName(r) : null)),
    peak_bytes: w.peak + base,
    peak_us: w.peakUs,
    records: w.records,
  };
}
