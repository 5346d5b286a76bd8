// The pass over one step's kept records behind the Timeline (step-bands.ts): each block of the
// step with its span in the window [start, end) (allocation to free; a block alive at the window's
// start starts there, one alive at its end ends there), allocated at each column's end and its most
// within the column, and the phase and range of each column. One pass over the step's records,
// found by a binary search over the kept records (their times ascend: the reader merges the ring's
// lanes by time); allocated is relative to the window's start, which the caller knows.

import { ACTION, isMark } from "../ffi/events";
import type { ProfilerModel } from "./model";
import { N_PHASE } from "./steps";
import { partitionPoint } from "./partition";

/** A block of the window as the pass over its records finds it. */
export interface WindowBlock {
  address: number;
  size: number;
  stream: number | null;
  /** Its span in the window, and the columns of its start and of its free (columns: not freed). */
  from: number;
  to: number;
  colFrom: number;
  colTo: number;
  /** When allocated (null: before the window) and freed (null: not in the window). */
  alloc: number | null;
  free: number | null;
  /** Phase code (−1: allocation not seen), range id and phase instance of its allocation; of its free. */
  phase: number;
  range: number;
  inst: number;
  fPhase: number;
  fRange: number;
  fInst: number;
  /** The kept records' slot of its allocation (−1: before the window): where its stack is read. */
  rec: number;
}

/** The first record number in [lo, hi) whose time is at least `us` (times ascend). */
function firstAtOrAfter(m: ProfilerModel, lo: number, hi: number, us: number): number {
  const t = m.tail!;
  return partitionPoint(lo, hi, (i) => t.time_us[t.slot(i)]! < us);
}

/** The column of a time: `columns` of equal span over [start, end); outside it, the nearest. */
export function columnOf(start: number, end: number, columns: number): (us: number) => number {
  const colUs = Math.max(1, end - start) / columns;
  return (us) => Math.max(0, Math.min(columns - 1, Math.floor((us - start) / colUs)));
}

export interface StepWindow {
  blocks: WindowBlock[];
  /** By phase instance (each time the phase changed in the window): the phase after it (−1: none seen). */
  nextPhase: number[];
  /** Per column, relative to the window's start: allocated at its end, and the most within it. */
  allocated: number[];
  allocatedMax: number[];
  /** Per column: the phase code and range id with the most of the device's records in it, else the
   *  ones in effect (−1: before the window's first record). */
  phase: Int8Array;
  range: Int32Array;
  /** Allocated at the window's end and at its most (when), relative to its start; bytes of blocks
   *  from before the window freed in it; the device's records read. */
  alloc: number;
  peak: number;
  peakUs: number;
  earlierFreed: number;
  records: number;
}

export interface WindowSpec {
  device: number;
  step: number;
  /** The running step: every record from its start on is its own. */
  running: boolean;
  start: number;
  end: number;
  /** Where the kept records begin within the window (start, where they reach back to it). */
  fromUs: number;
  columns: number;
}

/** The blocks and columns of one step's window (see the file's head). */
export function readWindow(m: ProfilerModel, spec: WindowSpec): StepWindow {
  const t = m.tail!;
  const { device: dev, step, running, start, end, fromUs, columns } = spec;
  const col = columnOf(start, end, columns);
  // Where the step's records begin: the first record at or after its start time that moved the
  // model to this step (a mark, or this device's record, stamped with it or a later step); records
  // of the same microsecond before it belong to the step before, as the model counted them.
  const relevant = (s: number) => isMark(t.action[s]!) || t.device[s] === dev;
  let k = firstAtOrAfter(m, t.first, t.total, start);
  while (k < t.total && t.time_us[t.slot(k)] === start && !(relevant(t.slot(k)) && t.step[t.slot(k)]! >= step)) k++;

  // The blocks of the window (a step holds thousands at most).
  const list: WindowBlock[] = [];
  const open = new Map<number, WindowBlock>(); // by address: blocks allocated in the window, alive

  // Phase instances in the window (each time the phase changes) and the phase after each.
  const nextPhase: number[] = [];
  let inst = -1;
  let curPhase = -1;
  let curRange = 0;
  const enterPhase = (p: number) => {
    if (p === curPhase) return;
    if (inst >= 0) nextPhase[inst] = p;
    inst++;
    curPhase = p;
  };

  // Per column: records by phase and by range (the view's strips), and allocated.
  const phaseCount = new Uint32Array(columns * N_PHASE);
  const rangeCount: Map<number, number>[] = Array.from({ length: columns }, () => new Map());
  const phaseAt = new Int8Array(columns).fill(-1); // the phase in effect as each column began
  const rangeAt = new Int32Array(columns).fill(-1);
  const allocated = new Array<number>(columns).fill(0);
  // One more than the columns: closing a column starts the next one at its end value.
  const allocatedMax = new Array<number>(columns + 1).fill(-Infinity);
  // Allocated relative to the window's start (whole: the step record's allocated_at_start).
  let alloc = 0;
  let peak = 0;
  let peakUs = fromUs;
  let earlierFreed = 0;
  let shownCol = 0; // columns before this one are closed
  const closeTo = (c: number) => {
    for (; shownCol < c; shownCol++) {
      allocated[shownCol] = alloc;
      if (alloc > allocatedMax[shownCol + 1]!) allocatedMax[shownCol + 1] = alloc;
      if (phaseAt[shownCol + 1] === -1) phaseAt[shownCol + 1] = curPhase;
      if (rangeAt[shownCol + 1] === -1 && curPhase >= 0) rangeAt[shownCol + 1] = curRange;
    }
  };
  allocatedMax[0] = 0;
  let records = 0;
  const free = (s: number, tUs: number, c: number) => {
    const a = t.address[s]!;
    let b = open.get(a);
    if (b !== undefined) open.delete(a);
    else {
      // A block from before the window: its size is the one the model freed (torch's block).
      b = { address: a, size: t.block[s]!, stream: null, from: fromUs, to: tUs, alloc: null, free: null, colFrom: 0, colTo: c, phase: -1, range: 0, inst: -1, fPhase: -1, fRange: 0, fInst: -1, rec: -1 };
      list.push(b);
      earlierFreed += b.size;
    }
    Object.assign(b, { to: tUs, free: tUs, colTo: c, fPhase: t.phase[s]!, fRange: t.range[s]!, fInst: inst });
    alloc -= b.size;
  };

  for (; k < t.total; k++) {
    const s = t.slot(k);
    const a = t.action[s]!;
    const st = t.step[s]!;
    const mark = isMark(a);
    if (!mark && t.device[s] !== dev) continue;
    // The first record stamped with a later step (a mark, or this device's own) begins the next step.
    if (!running && st > step) break;
    const tUs = t.time_us[s]!;
    if (!running && tUs > end) break; // the boundary's record was not kept: stop at the step's end
    const c = col(tUs);
    closeTo(c);
    if (mark) {
      if (a === ACTION.phase || a === ACTION.step || a === ACTION.range_enter) (curRange = t.range[s]!), enterPhase(t.phase[s]!);
      else if (a === ACTION.range_exit) (curRange = m.rangeParent.get(t.range[s]!) ?? 0), enterPhase(t.phase[s]!);
      if (phaseAt[c] === -1) (phaseAt[c] = curPhase), (rangeAt[c] = curRange);
      continue;
    }
    // A record stamped with an older step (written just before a mark from another thread) keeps
    // the phase the marks set; the others carry the loop's state.
    if (st >= step) (curRange = t.range[s]!), enterPhase(t.phase[s]!);
    if (phaseAt[c] === -1) (phaseAt[c] = curPhase), (rangeAt[c] = curRange);
    records++;
    const ph = t.phase[s]!;
    if (ph < N_PHASE) phaseCount[c * N_PHASE + ph]! += a === ACTION.free ? 2 : 1; // a folded pair is two records
    const rc = rangeCount[c]!;
    const rg = t.range[s]!;
    rc.set(rg, (rc.get(rg) ?? 0) + 1);
    if (a === ACTION.alloc) {
      const address = t.address[s]!;
      const old = open.get(address);
      // Its free was lost: the model drops the old block here, and so does the band.
      if (old !== undefined) (old.to = tUs), (old.colTo = c), (alloc -= old.size);
      const b: WindowBlock = { address, size: t.block[s]!, stream: t.stream[s]!, from: tUs, to: end, alloc: tUs, free: null, colFrom: c, colTo: columns, phase: curPhase, range: curRange, inst, fPhase: -1, fRange: 0, fInst: -1, rec: s };
      open.set(address, b);
      list.push(b);
      alloc += b.size;
      if (alloc > allocatedMax[c]!) allocatedMax[c] = alloc;
      if (alloc > peak) (peak = alloc), (peakUs = tUs);
    } else if (a === ACTION.free || a === ACTION.free_requested) free(s, tUs, c);
  }
  closeTo(columns);
  if (curPhase >= 0) nextPhase[inst] = -1;


  // The strips: the phase and range with the most records in each column, else the ones in effect.
  const phase = new Int8Array(columns);
  const range = new Int32Array(columns);
  for (let c = 0; c < columns; c++) {
    let best = -1;
    let most = 0;
    for (let p = 0; p < N_PHASE; p++) if (phaseCount[c * N_PHASE + p]! > most) (most = phaseCount[c * N_PHASE + p]!), (best = p);
    phase[c] = best >= 0 ? best : phaseAt[c]!;
    let r = rangeAt[c]!;
    let rMost = 0;
    for (const [id, count] of rangeCount[c]!) if (count > rMost) (rMost = count), (r = id);
    range[c] = r;
  }
  return { blocks: list, nextPhase, allocated, allocatedMax: allocatedMax.slice(0, columns), phase, range, alloc, peak, peakUs, earlierFreed, records };
}
