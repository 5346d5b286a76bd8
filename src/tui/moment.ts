// The moment the per-process screens show: now, or a finished step of the past (`[` earlier, `]`
// later, past the newest back to now; Esc: now). On Tensors, `P` shows the blocks alive at a peak
// instead of now: the running step's, then the run's highest; at a past step, its peak or its end.
// Pure: the user's choice (UiState) and the process's model in, what to show out.
import type { ProcessModel } from "../collect/live";
import { peakBlockLines, peakSteps, PEAK_STEPS_KEPT, segmentsAt, steps, type BlockLine } from "../profiler";
import { formatBytes } from "./format";
import { counted } from "../words";
import type { UiState } from "./ui-state";

export const PEAK_VIEWS = ["now", "step", "run"] as const;
export type PeakView = (typeof PEAK_VIEWS)[number];

/** The finished steps of the shown device that a screen can go back to, oldest first. */
export function pastSteps(pm: ProcessModel | undefined): number[] {
  const d = pm?.model.devices[0];
  if (!pm || !d) return [];
  return steps(pm.model, { device: d.device }).steps.filter((s) => s.complete).map((s) => s.step);
}

/** `[`: the step before the one shown (from now: the last finished one). Returns what to say. */
export function earlier(ui: UiState, pm: ProcessModel | undefined): string {
  const all = pastSteps(pm);
  if (all.length === 0) return "[: no finished step yet to go back to";
  const at = ui.when === null ? all.length : all.indexOf(ui.when);
  if (at === 0) return `step ${all[0]} is the oldest kept`;
  ui.when = all[(at < 0 ? all.length : at) - 1]!;
  return "";
}

/** `]`: the step after the one shown; after the newest, now. */
export function later(ui: UiState, pm: ProcessModel | undefined): string {
  if (ui.when === null) return "]: this is now";
  const all = pastSteps(pm);
  const at = all.indexOf(ui.when);
  ui.when = at >= 0 && at + 1 < all.length ? all[at + 1]! : null;
  return "";
}

/** The screens that show a past step; the others show now, and say so. */
export const PAST_SCREENS = ["process", "tensors", "segments", "timeline"];

/** The status line's mark while a past step is shown, on screen `id`. */
export function pastMark(ui: UiState, id: string): string | null {
  if (ui.when === null) return null;
  if (!PAST_SCREENS.includes(id)) return `this screen shows now (Esc: all do); step ${ui.when} shows on Process, Tensors, Segments, Timeline`;
  return `PAST: step ${ui.when}  [ ] steps  P peak/end  Esc now`;
}

/** What the Tensors and Segments screens show: now, or the blocks alive at a peak or at a past
 *  step's end. */
export type TensorsMoment = { kind: "now" } | { kind: "peak"; which: "step" | "run" | number } | { kind: "end"; step: number };

export function tensorsMoment(ui: UiState): TensorsMoment {
  const peak = ui.peakView ?? "now";
  if (ui.when !== null) return peak === "now" ? { kind: "end", step: ui.when } : { kind: "peak", which: ui.when };
  return peak === "now" ? { kind: "now" } : { kind: "peak", which: peak };
}

/** The moment's words: "the run's peak", "the end of step 12". */
export function momentWords(moment: Exclude<TensorsMoment, { kind: "now" }>): string {
  if (moment.kind === "end") return `the end of step ${moment.step}`;
  return moment.which === "run" ? "the run's peak" : moment.which === "step" ? "the running step's peak" : `step ${moment.which}'s peak`;
}

/** The Segments screen at a moment other than now (null: that step's blocks are no longer kept). */
export function momentSegments(pm: ProcessModel, moment: Exclude<TensorsMoment, { kind: "now" }>) {
  const d = pm.model.devices[0]!;
  return moment.kind === "end" ? segmentsAt(pm.model, { device: d.device, which: moment.step, end: true, withBlocks: true }) : segmentsAt(pm.model, { device: d.device, which: moment.which, withBlocks: true });
}

/** `P`: the next peak view; at a past step there are two (its end, its peak). */
export function nextPeakView(ui: UiState): void {
  const cur = ui.peakView ?? "now";
  ui.peakView = ui.when !== null ? (cur === "now" ? "step" : "now") : PEAK_VIEWS[(PEAK_VIEWS.indexOf(cur) + 1) % PEAK_VIEWS.length]!;
}

/** The Tensors screen's blocks at a moment other than now: the lines, what they add up to and a
 *  heading in words; `missing`: why there are none (that step's blocks are no longer kept). */
export interface MomentBlocks {
  lines: BlockLine[];
  bytes: number;
  /** Allocated at the moment less the blocks seen alive at it (lost records, memory from before). */
  unseen: number;
  heading: string;
  missing: string | null;
}

export function momentBlocks(pm: ProcessModel, moment: Exclude<TensorsMoment, { kind: "now" }>): MomentBlocks {
  const d = pm.model.devices[0]!;
  const got = moment.kind === "end" ? peakBlockLines(pm.model, { device: d.device, which: moment.step, end: true }) : peakBlockLines(pm.model, { device: d.device, which: moment.which });
  const what = momentWords(moment);
  if (!got) {
    const kept = peakSteps(d);
    return { lines: [], bytes: 0, unseen: 0, heading: `Alive at ${what}`, missing: `the blocks of ${what} are no longer kept (kept: steps ${kept.join(", ") || "none yet"}; a live process keeps the last ${PEAK_STEPS_KEPT})` };
  }
  const v = got.view;
  const where = moment.kind === "peak" && (moment.which === "run" || moment.which === "step") ? ` (step ${v.step})` : "";
  const unseen = v.unseen_bytes !== 0 ? `; ${formatBytes(v.unseen_bytes)} of it not seen allocated` : "";
  return { lines: got.lines, bytes: v.peak_bytes, unseen: v.unseen_bytes, heading: `Alive at ${what}${where}: ${formatBytes(v.peak_bytes)} in ${counted(got.lines.length, "block")}${unseen}`, missing: null };
}
