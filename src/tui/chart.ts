// Text charts: area charts in braille (2×4 dots a cell) or plain ASCII, and bars. Pure functions:
// numbers in, lines of text out, so they are tested without a terminal.
import { OUTSIDE_PHASE } from "../words";

const LEFT = [0x40, 0x04, 0x02, 0x01]; // dots of the left column, bottom to top
const RIGHT = [0x80, 0x20, 0x10, 0x08];

/** Fit `values` to `n` points, keeping each point's maximum: a spike is never averaged away. */
export function resample(values: readonly number[], n: number): number[] {
  if (n <= 0) return [];
  if (values.length <= n) return [...Array(n - values.length).fill(Number.NaN), ...values];
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = Math.floor((i * values.length) / n);
    const b = Math.max(a + 1, Math.floor(((i + 1) * values.length) / n));
    let m = -Infinity;
    for (let j = a; j < b; j++) m = Math.max(m, values[j]!);
    out.push(m);
  }
  return out;
}

/**
 * An area chart `width` cells wide and `height` rows tall of the newest values (right-aligned),
 * scaled to `max`. NaN is "no data" (blank). Braille gives 2 points a cell and 4 levels a row;
 * ASCII one point a cell and 2 levels a row (':' half, '#' full).
 */
export function areaChart(values: readonly number[], opts: { width: number; height: number; max: number; ascii?: boolean; line?: readonly number[] }): string[] {
  const { width, height, ascii } = opts;
  const max = opts.max > 0 ? opts.max : 1;
  // `line`: a second series drawn as a dotted line over the area (NVML-used over reserved): the
  // level of each of its points gets one dot, visible wherever it stands above the area.
  const levelOf = (v: number, steps: number) => (Number.isNaN(v) ? 0 : Math.round((Math.min(v, max) / max) * height * steps));
  if (ascii) {
    const pts = resample(values, width);
    const over = opts.line ? resample(opts.line, width).map((v) => levelOf(v, 2)) : null;
    const rows: string[] = [];
    for (let r = height - 1; r >= 0; r--) {
      let line = "";
      for (let c = 0; c < pts.length; c++) {
        const inRow = levelOf(pts[c]!, 2) - r * 2;
        const o = over ? over[c]! - r * 2 : 0;
        line += inRow >= 2 ? "#" : (o === 1 || o === 2) && inRow < o ? "-" : inRow === 1 ? ":" : " ";
      }
      rows.push(line);
    }
    return rows;
  }
  const pts = resample(values, width * 2);
  const levels = pts.map((v) => levelOf(v, 4));
  const over = opts.line ? resample(opts.line, width * 2).map((v) => levelOf(v, 4)) : null;
  const rows: string[] = [];
  for (let r = height - 1; r >= 0; r--) {
    let line = "";
    for (let c = 0; c < width; c++) {
      let bits = 0;
      for (const [k, dots] of [[0, LEFT], [1, RIGHT]] as const) {
        const inRow = levels[c * 2 + k]! - r * 4;
        for (let d = 0; d < Math.min(4, inRow); d++) bits |= dots[d]!;
        if (over) {
          const o = over[c * 2 + k]! - r * 4;
          if (o >= 1 && o <= 4) bits |= dots[o - 1]!;
        }
      }
      line += String.fromCharCode(0x2800 + bits);
    }
    rows.push(line);
  }
  return rows;
}

/** A horizontal bar: `fraction` of `width` filled. */
export function bar(fraction: number, width: number, ascii = false): string {
  const f = Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 0));
  const full = Math.round(f * width);
  return (ascii ? "#" : "█").repeat(full) + (ascii ? "." : "░").repeat(Math.max(0, width - full));
}

/**
 * Buckets of a timeline (sparse: only where something happened) laid on a uniform time axis of
 * `n` points from `fromUs` to `toUs`. A point takes the highest value of the buckets in it; a point
 * with none carries the last value before it forward (memory stays allocated between events).
 */
export function onTimeAxis(buckets: readonly { start_us: number; max: number; last: number }[], fromUs: number, toUs: number, n: number): number[] {
  const out = new Array<number>(n).fill(Number.NaN);
  const span = Math.max(1, toUs - fromUs);
  const lastIn = new Array<number>(n).fill(Number.NaN);
  for (const b of buckets) {
    // A bucket that began before the window but reaches into it lands in the first point.
    const i = Math.max(0, Math.min(n - 1, Math.floor(((b.start_us - fromUs) / span) * n)));
    out[i] = Number.isNaN(out[i]!) ? b.max : Math.max(out[i]!, b.max);
    lastIn[i] = b.last;
  }
  let carry = Number.NaN;
  for (let i = 0; i < n; i++) {
    if (Number.isNaN(out[i]!)) out[i] = carry;
    else carry = lastIn[i]!;
  }
  return out;
}

const PHASE_LETTER = ["o", "F", "B", "O"]; // outside ("other"), forward, backward, optimizer

/**
 * The phase band under a chart: runs of one phase as a letter then a rule ("F━━━B━━━━O━"), so it
 * reads without color too; columns with no record stay blank. Returned as runs for coloring.
 */
export function phaseRuns(phases: ArrayLike<number>, ascii = false): { phase: number; text: string }[] {
  const rule = ascii ? "-" : "━";
  const runs: { phase: number; text: string }[] = [];
  for (let c = 0; c < phases.length; c++) {
    const p = phases[c]!;
    const last = runs[runs.length - 1];
    if (last && last.phase === p) last.text += p < 0 ? " " : rule;
    else runs.push({ phase: p, text: p < 0 ? " " : PHASE_LETTER[p] ?? "?" });
  }
  return runs;
}

/**
 * A line of `width` with marks under chart columns: `mark` at the column, then its label after it
 * ("^ peak 1.2 GiB"), or before it where the line ends ("peak 1.2 GiB ^"). A mark whose label
 * would overwrite an earlier one keeps only its mark character, where that cell is free.
 */
export function markLine(width: number, marks: { column: number; mark: string; label: string }[]): string {
  const cells = new Array<string>(width).fill(" ");
  for (const { column, mark, label } of marks) {
    if (column < 0 || column >= width) continue;
    const after = `${mark} ${label}`;
    const before = `${label} ${mark}`;
    const [start, text] = column + after.length <= width ? [column, after] : [column - before.length + 1, before];
    if (start < 0 || cells.slice(start, start + text.length).some((x) => x !== " ")) {
      if (cells[column] === " ") cells[column] = mark;
      continue;
    }
    for (let k = 0; k < text.length; k++) cells[start + k] = text[k]!;
  }
  return cells.join("");
}

/** Width of the label gutter left of a chart ("125.22 MiB" and the axis tick). */
export const GUTTER = 11;

/**
 * The y axis of a chart `rows` tall scaled to `max`: a label per row, right-aligned in the gutter,
 * then a tick: the top row says `max`, the bottom row 0, a row between (4 rows or more) the
 * middle; other rows only the axis.
 */
export function yAxis(rows: number, max: number, format: (v: number) => string, ascii = false): string[] {
  const tick = ascii ? "|" : "┤";
  const line = ascii ? "|" : "│";
  const out: string[] = [];
  for (let r = 0; r < rows; r++) {
    const label = r === 0 ? format(max) : r === rows - 1 ? "0" : rows >= 4 && r === Math.floor(rows / 2) ? format(max * (1 - r / (rows - 1))) : "";
    out.push(`${label.slice(0, GUTTER - 2).padStart(GUTTER - 2)} ${label ? tick : line}`);
  }
  return out;
}

/** "4.5 s", "12 min", "1.5 h": how long ago a point of the time axis lies. */
function ago(us: number): string {
  const s = us / 1e6;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/**
 * The time axis under a chart `width` cells wide spanning `spanUs` up to its right edge, called
 * `end` ("now", or "end" for a finished replay): the left edge, the middle and the right edge
 * labelled, after a blank gutter.
 */
export function timeAxis(width: number, spanUs: number, end: string): string {
  const cells = new Array<string>(width).fill(" ");
  const put = (at: number, text: string) => {
    const start = Math.max(0, Math.min(width - text.length, at));
    for (let k = 0; k < text.length && start + k < width; k++) cells[start + k] = text[k]!;
  };
  put(0, `-${ago(spanUs)}`);
  if (width >= 40) {
    const mid = `-${ago(spanUs / 2)}`;
    put(Math.floor(width / 2) - Math.floor(mid.length / 2), mid);
  }
  put(width - end.length, end);
  return " ".repeat(GUTTER) + cells.join("");
}

/** What the phase letters under a chart stand for. */
export const PHASE_LEGEND = `F forward  B backward  O optimizer  o ${OUTSIDE_PHASE} them`;
