// "What was alive at the peak?": the blocks alive at the running step's peak, at a recent step's
// peak, or at the run's highest, grouped by name, category, phase or range, sizes summed. The
// groups add up to the peak: where the model did not see every block of it (records lost, blocks
// from before it began), the rest is its own row, said as such, never spread over the others.

import type { PeakBlocks, PeakPicture } from "./at-peak";
import { CATEGORIES } from "./categories";
import type { DeviceState } from "./device";
import type { ProfilerModel } from "./model";
import { blockLabel, type BlockLine } from "./queries";
import { PHASE_NAMES } from "../ffi/events";
import { RESYNCED_STEP, type TensorInfo } from "./blocks";
import { segmentMapAt } from "./segment-map";
import { frameLabel } from "./user-frame";
import { sampledOut, settle, stackWeight } from "./stack-weight";

export const PEAK_WHICH = ["step", "run"] as const;
export type PeakWhich = (typeof PEAK_WHICH)[number] | number;
export const PEAK_GROUPINGS = ["name", "category", "phase", "range", "frame"] as const;
export type PeakGrouping = (typeof PEAK_GROUPINGS)[number];

export interface PeakGroup {
  /** The name, the label of unnamed blocks, or the category, phase or range name. */
  key: string;
  bytes: number;
  blocks: number;
  /** The largest block's category (a name groups one tensor; a label one category). */
  category: string;
}

export interface AtPeak {
  device: number;
  /** "step": the running step's; "run": the highest of the run; a number: that finished step's. */
  which: "step" | "run" | "kept";
  /** The step's end rather than its peak (`peak_bytes` is then allocated at the end). */
  end: boolean;
  step: number;
  time_us: number | null;
  peak_bytes: number;
  by: PeakGrouping;
  groups: PeakGroup[];
  /** Groups left out past the limit, and their bytes. */
  more_groups: number;
  more_bytes: number;
  /** The peak less the blocks seen alive at it (lost records, blocks from before the model began). */
  unseen_bytes: number;
  partial: boolean;
}

/** The steps whose picture a device can give (finished ones), oldest first. */
export function peakSteps(d: DeviceState): number[] {
  return d.peaks.steps();
}

function pictureOf(d: DeviceState, which: PeakWhich, end: boolean): { pic: PeakPicture; which: AtPeak["which"] } | null {
  const pic = d.peaks.picture(d.cur, which, d.categoryCode, end);
  return pic && { pic, which: typeof which === "number" ? "kept" : which };
}

/** The group of blocks whose line is not known (no stack: not sampled, before the attach, autograd's engine). */
const WHERE_UNKNOWN = "(where unknown)";

/** The user's line of stack `stack` (user-frame.ts), or null where no stack or no user frame. */
export function userFrameLabel(m: ProfilerModel, stack: number): string | null {
  if (!stack || !m.stacks) return null;
  const k = m.stacks.userFrame(stack);
  return k < 0 ? null : frameLabel(m.stacks.frames(stack)[k]!);
}

/** Block i's category code and name: where the block is still alive, as it is known now (names
 *  often come after the step of the run's peak, and categories settle at phase ends). */
function known(d: DeviceState, b: PeakBlocks, i: number): { cat: number; name: string | undefined; tensor?: TensorInfo } {
  const slot = d.blocks.bySlot.get(b.address[i]!);
  if (slot !== undefined && d.blocks.serial[slot] === b.serial[i]) return { cat: d.categoryCode(slot), name: d.blocks.names[slot], tensor: d.blocks.tensors[slot] };
  return { cat: b.category[i]!, name: b.names[i] };
}

function keyOf(m: ProfilerModel, b: PeakBlocks, i: number, by: PeakGrouping, k: { cat: number; name: string | undefined }): string {
  const cat = CATEGORIES[k.cat] ?? "other";
  const phase = PHASE_NAMES[b.phase[i]!] ?? `phase#${b.phase[i]}`;
  if (by === "category") return cat;
  if (by === "phase") return phase;
  if (by === "range") return m.rangeName(b.range[i]!) ?? "(no range)";
  if (by === "frame") return userFrameLabel(m, b.stack[i]!) ?? WHERE_UNKNOWN;
  const step = b.step[i] === RESYNCED_STEP ? null : b.step[i]!;
  return k.name ?? blockLabel(cat, phase, m.rangeName(b.range[i]!), step);
}

/** The blocks alive at a peak of device `device` (or a kept step's end), grouped; null where that
 *  step's picture is not kept. */
export function atPeak(m: ProfilerModel, opts: { device: number; which?: PeakWhich; by?: PeakGrouping; limit?: number; end?: boolean }): AtPeak | null {
  const d = m.device(opts.device);
  if (!d) return null;
  const got = pictureOf(d, opts.which ?? "step", opts.end === true);
  if (!got) return null;
  const { pic } = got;
  const by = opts.by ?? "name";
  const groups = new Map<string, PeakGroup & { largest: number }>();
  const b = pic.blocks;
  // By line, a sampled block stands for more than itself (stack-weight.ts); the blocks whose line
  // is not known take what is left, so that the groups still add up to the peak.
  const sampling = by === "frame" ? (m.stacks?.sampling ?? null) : null;
  const weighed = new Map<string, number>();
  let pool = 0;
  for (let i = 0; i < b.n; i++) {
    const k = known(d, b, i);
    const key = keyOf(m, b, i, by, k);
    const size = b.size[i]!;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { key, bytes: 0, blocks: 0, category: "other", largest: -1 }));
    g.bytes += size;
    g.blocks++;
    if (sampling) {
      if (key !== WHERE_UNKNOWN) weighed.set(key, (weighed.get(key) ?? 0) + stackWeight(size, sampling));
      else if (!b.stack[i] && sampledOut(size, sampling)) pool += size;
    }
    if (size > g.largest) {
      g.largest = size;
      g.category = CATEGORIES[k.cat] ?? "other";
    }
  }
  if (sampling) {
    const lines = [...groups.values()].filter((g) => g.key !== WHERE_UNKNOWN);
    const s = settle(
      lines.map((g) => g.bytes),
      lines.map((g) => weighed.get(g.key)!),
      pool,
    );
    lines.forEach((g, i) => (g.bytes = s.bytes[i]!));
    const u = groups.get(WHERE_UNKNOWN);
    if (u) u.bytes -= pool - s.left;
  }
  const all = [...groups.values()].sort((x, y) => y.bytes - x.bytes || (x.key < y.key ? -1 : 1));
  const limit = opts.limit ?? 500;
  const shown = all.slice(0, limit).map(({ key, bytes, blocks, category }) => ({ key, bytes, blocks, category }));
  const more = all.slice(limit);
  const seen = b.bytes();
  return {
    device: d.device,
    which: got.which,
    end: opts.end === true,
    step: pic.step,
    time_us: Number.isFinite(pic.time_us) ? pic.time_us : null,
    peak_bytes: pic.peak_bytes,
    by,
    groups: shown,
    more_groups: more.length,
    more_bytes: more.reduce((s, g) => s + g.bytes, 0),
    unseen_bytes: pic.peak_bytes - seen,
    partial: pic.partial,
  };
}

/** The blocks alive at a peak (or a kept step's end) as the Tensors screen's lines, largest first:
 *  the same table as now, at another moment. Null where that picture is not kept. */
export function peakBlockLines(m: ProfilerModel, opts: { device: number; which: PeakWhich; end?: boolean }): { lines: BlockLine[]; view: AtPeak } | null {
  const d = m.device(opts.device);
  const view = atPeak(m, { ...opts, by: "category", limit: Infinity });
  const got = d && pictureOf(d, opts.which, opts.end === true);
  if (!d || !view || !got) return null;
  const b = got.pic.blocks;
  const lines: BlockLine[] = [];
  for (let i = 0; i < b.n; i++) {
    const k = known(d, b, i);
    const tensor = k.tensor;
    const category = CATEGORIES[k.cat] ?? "other";
    const phase = PHASE_NAMES[b.phase[i]!] ?? `phase#${b.phase[i]}`;
    const step = b.step[i] === RESYNCED_STEP ? null : b.step[i]!;
    const rangeName = m.rangeName(b.range[i]!);
    lines.push({
      address: b.address[i]!,
      size_bytes: b.size[i]!,
      stream: 0,
      time_us: b.time_us[i]!,
      step,
      phase,
      range: b.range[i]!,
      range_name: rangeName,
      name: k.name ?? null,
      name_source: k.name === undefined ? null : tensor?.carried ? "earlier step" : "agent",
      shape: tensor?.shape ?? null,
      dtype: tensor?.dtype ?? null,
      label: k.name ?? blockLabel(category, phase, rangeName, step),
      category,
      category_source: k.name !== undefined ? "names" : "lifetime",
      stack: b.stack[i]!,
    });
  }
  lines.sort((x, y) => y.size_bytes - x.size_bytes || x.address - y.address);
  return { lines, view };
}

/** The segment map at a peak (or a kept step's end): the blocks alive then in the segments of then. */
export function segmentsAt(m: ProfilerModel, opts: { device: number; which: PeakWhich; end?: boolean; withBlocks?: boolean }) {
  const d = m.device(opts.device);
  const got = d && pictureOf(d, opts.which, opts.end === true);
  if (!d || !got) return null;
  // Each block as the Tensors screen names it at that moment (known(): as it is known now).
  const describe = (row: number) => {
    const k = known(d, got.pic.blocks, row);
    return { category: CATEGORIES[k.cat] ?? "other", name: k.name ?? null };
  };
  return { ...segmentMapAt(d, got.pic, describe, { withBlocks: opts.withBlocks }), step: got.pic.step, time_us: Number.isFinite(got.pic.time_us) ? got.pic.time_us : null };
}
