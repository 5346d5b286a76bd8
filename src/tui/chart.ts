// Text charts: area charts in braille (2×4 dots a cell) or plain ASCII, and bars. Pure functions:
// numbers in, lines of text out, so they are tested without a terminal.
import { OUTSIDE_PHASE } from "../words";
import { formatSpan } from "./screens/timeline-rows";

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
  // Each point's level (in half rows for ASCII, quarter rows for braille): what the chart draws.
  // `line`: a second series drawn as a dotted line over the area (NVML-used over reserved): the
  // level of each of its points gets one dot, visible wherever it stands above the area.
  const steps = ascii ? 2 : 4;
  const points = ascii ? width : width * 2;
  const levelsOf = (series: readonly number[]) => {
    const out = new Int32Array(Math.max(0, points));
    const pts = resample(series, points);
    for (let i = 0; i < pts.length; i++) out[i] = Number.isNaN(pts[i]!) ? 0 : Math.round((Math.min(pts[i]!, max) / max) * height * steps);
    return out;
  };
  const levels = levelsOf(values);
  const over = opts.line ? levelsOf(opts.line) : null;
  // A screen redrawn each interval charts the same levels again (an idle GPU's, a history still
  // filling with the same figure, a series moved by less than a dot): drawn once.
  const key = `${width},${height},${ascii ? 1 : 0}`;
  const hit = drawnCharts.find((c) => c.key === key && sameLevels(c.levels, levels) && sameLevels(c.over, over));
  if (hit) return [...hit.rows];
  const rows = ascii ? drawAscii(levels, over, height) : drawBraille(levels, over, width, height);
  drawnCharts.unshift({ key, levels, over, rows });
  drawnCharts.length = Math.min(drawnCharts.length, DRAWN_CHARTS);
  return [...rows];
}

/** The charts drawn last (every chart of a frame: two a GPU, two on the Process screen), newest first. */
const drawnCharts: { key: string; levels: Int32Array; over: Int32Array | null; rows: string[] }[] = [];
const DRAWN_CHARTS = 16;

function sameLevels(a: Int32Array | null, b: Int32Array | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** ASCII: one point a cell, two levels a row (':' half, '#' full; '-' the line's point above the area). */
function drawAscii(levels: Int32Array, over: Int32Array | null, height: number): string[] {
  const rows: string[] = [];
  for (let r = height - 1; r >= 0; r--) {
    let line = "";
    for (let c = 0; c < levels.length; c++) {
      const inRow = levels[c]! - r * 2;
      const o = over ? over[c]! - r * 2 : 0;
      line += inRow >= 2 ? "#" : (o === 1 || o === 2) && inRow < o ? "-" : inRow === 1 ? ":" : " ";
    }
    rows.push(line);
  }
  return rows;
}

/** Braille: two points a cell, four levels a row; the line's point one dot. */
function drawBraille(levels: Int32Array, over: Int32Array | null, width: number, height: number): string[] {
  const rows: string[] = [];
  const cells = new Array<string>(width);
  for (let r = height - 1; r >= 0; r--) {
    for (let c = 0; c < width; c++) {
      let bits = 0;
      for (let k = 0; k < 2; k++) {
        const dots = k === 0 ? LEFT : RIGHT;
        const inRow = levels[c * 2 + k]! - r * 4;
        for (let d = 0; d < Math.min(4, inRow); d++) bits |= dots[d]!;
        if (over) {
          const o = over[c * 2 + k]! - r * 4;
          if (o >= 1 && o <= 4) bits |= dots[o - 1]!;
        }
      }
      cells[c] = String.fromCharCode(0x2800 + bits);
    }
    rows.push(cells.join(""));
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

/** A chart's vertical scale: the value its top row reaches (the chart is drawn to it, not to the
 *  data's maximum, so that the ticks are round and true) and how a tick's value is written. */
export interface AxisScale {
  top: number;
  label: (v: number) => string;
}

/** Tops a scale rounds up to (× a power of ten): their halves and quarters are round too. */
const ROUND_TOPS = [1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10];

/** The least round top (ROUND_TOPS × 10^k) at or above `v` (> 0). */
export function roundUp(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v));
  // A float's log may land a hair under a power of ten: the smallest top that holds v wins.
  for (const m of ROUND_TOPS) if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

/** A number as a tick writes it: no more decimals than it has (40, 2.5, 0.6). */
const tickNumber = (v: number) => String(Number(v.toFixed(2)));

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** Bytes up to `max`, in the unit `max` reads best in, topped at a round number of it: 79.6 GiB
 *  reads 0 / 40 / 80 GiB. */
export function byteScale(max: number): AxisScale {
  let u = 0;
  while (u < UNITS.length - 1 && max >= 1024 ** (u + 1)) u++;
  const unit = 1024 ** u;
  const top = roundUp(Math.max(1, max / unit)) * unit;
  return { top, label: (v) => (v === 0 ? "0" : `${tickNumber(v / unit)} ${UNITS[u]}`) };
}

/** 0 to 100 %: 0 / 50 / 100%. */
export const PERCENT_SCALE: AxisScale = { top: 100, label: (v) => (v === 0 ? "0" : `${tickNumber(v)}%`) };

/**
 * The y axis of a chart `rows` tall drawn to `scale.top`: the top row says the top, the bottom row
 * 0, and between them the half (4 rows or more) and the quarters (9 rows or more), each on the
 * row whose band holds its value (row i from the bottom holds i/rows to (i+1)/rows of the top);
 * other rows only the axis.
 */
export function yAxis(rows: number, scale: AxisScale, ascii = false): string[] {
  const tick = ascii ? "|" : "┤";
  const line = ascii ? "|" : "│";
  const labels = new Array<string>(rows).fill("");
  const fractions = rows >= 9 ? [0.25, 0.5, 0.75] : rows >= 4 ? [0.5] : [];
  for (const f of fractions) labels[rows - 1 - Math.min(rows - 1, Math.floor(f * rows))] = scale.label(f * scale.top);
  if (rows > 0) labels[rows - 1] = "0";
  labels[0] = scale.label(scale.top);
  return labels.map((label) => `${label.slice(0, GUTTER - 2).padStart(GUTTER - 2)} ${label ? tick : line}`);
}

/** Spans between two time ticks, in µs: the first that leaves room between the labels is used. */
const TICK_SPANS_US = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400].map((s) => s * 1e6);
const SUBSECOND_SPANS_US = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5];

/** "-500 ms", "-30 s", "-2 min", "-1.5 h": a tick's time before the right edge, exact, in the
 *  unit of the ticks' spacing `everyUs` (one unit along an axis: -150 s, -120 s, not -2 min). */
export function tickLabel(us: number, everyUs = us): string {
  if (us === 0) return "0";
  const [unit, name] = everyUs < 1e6 ? [1e3, "ms"] : everyUs < 60e6 ? [1e6, "s"] : everyUs < 3600e6 ? [60e6, "min"] : [3600e6, "h"];
  return `-${Number((us / unit).toFixed(1))} ${name}`;
}

/**
 * The time axis under a chart `width` cells wide spanning `spanUs` up to its right edge, called
 * `end` ("now", or "end" for a finished replay), after a blank gutter: ticks at round times
 * before the edge (every 30 s, every 2 min, …: as many as fit with room between them), each label
 * centred on the column its time falls in; a label that would not fit whole is left out, never
 * moved off its time.
 */
export function timeAxis(width: number, spanUs: number, end: string): string {
  const cells = new Array<string>(width).fill(" ");
  const free = (from: number, to: number) => from >= 0 && to <= width && cells.slice(Math.max(0, from - 1), Math.min(width, to + 1)).every((c) => c === " ");
  const put = (from: number, text: string) => {
    for (let k = 0; k < text.length; k++) cells[from + k] = text[k]!;
  };
  put(Math.max(0, width - end.length), end.slice(0, width));
  if (spanUs > 0 && width > 0) {
    // The widest label is about 8 cells; a tick every 12 cells or more leaves them room.
    const every = [...SUBSECOND_SPANS_US, ...TICK_SPANS_US].find((t) => (t / spanUs) * width >= 12) ?? TICK_SPANS_US.at(-1)!;
    for (let t = every; t <= spanUs; t += every) {
      const column = Math.floor(((spanUs - t) / spanUs) * width);
      const text = tickLabel(t, every);
      const from = column - Math.floor(text.length / 2);
      if (free(from, from + text.length)) put(from, text);
    }
  }
  return " ".repeat(GUTTER) + cells.join("");
}

/** What the phase letters under a chart stand for. */
export const PHASE_LEGEND = `F forward  B backward  O optimizer  o ${OUTSIDE_PHASE} them`;

/** A column's phase is drawn where one phase held it (nearly) whole: a column in which another
 *  phase took a twentieth or more is drawn as mixed. With steps shorter than a column every column
 *  is mixed, so the strip never draws one phase through several steps (a backward of seconds). */
export const PURE_SHARE = 0.95;
/** phaseStrip's code for a column that no phase held whole. */
export const MIXED = 4;

const PHASE_WORDS = ["o " + OUTSIDE_PHASE + " them", "F forward", "B backward", "O optimizer"];

/**
 * The phase strip under a chart, from how long each phase lasted in each column (phaseShares):
 * a column that one phase held (PURE_SHARE of its time) takes its letter and rule, as phaseRuns
 * draws them; a column of several phases (steps shorter than a column, or a phase's edge) is
 * drawn ┈ (ASCII `.`), never as one of them; a column the records cover for less than half its
 * time (none, or where the kept records begin) stays blank. The legend
 * gives the mixed columns' share of each phase, then the letters drawn, then what blank means.
 */
export function phaseStrip(shares: ArrayLike<number>, columnUs: number, ascii = false): { runs: { phase: number; text: string }[]; legend: string; parts: string[] } {
  const n = PHASE_LETTER.length;
  const columns = Math.floor(shares.length / n);
  const codes = new Int8Array(columns);
  const mixedUs = new Float64Array(n);
  let mixed = 0;
  for (let c = 0; c < columns; c++) {
    let total = 0;
    let best = 0;
    for (let p = 0; p < n; p++) {
      total += shares[c * n + p]!;
      if (shares[c * n + p]! > shares[c * n + best]!) best = p;
    }
    // A column the kept records cover for less than half its time (where they begin) is not known.
    if (!(total > 0) || total < columnUs / 2) codes[c] = -1;
    else if (shares[c * n + best]! >= PURE_SHARE * total) codes[c] = best;
    else {
      codes[c] = MIXED;
      mixed++;
      for (let p = 0; p < n; p++) mixedUs[p]! += shares[c * n + p]!;
    }
  }
  const mark = ascii ? "." : "┈";
  const runs = phaseRuns(codes, ascii).map((r) => (r.phase === MIXED ? { phase: MIXED, text: mark.repeat(r.text.length) } : r));
  // `parts`: the legend's pieces, each whole on a line where the legend is laid in several.
  if (mixed === 0) return { runs, legend: PHASE_LEGEND, parts: [1, 2, 3, 0].map((p) => PHASE_WORDS[p]!) };
  const all = mixedUs.reduce((a, b) => a + b, 0);
  const split = [1, 2, 3, 0]
    .filter((p) => mixedUs[p]! > 0)
    .map((p) => `${PHASE_LETTER[p]} ${Math.round((mixedUs[p]! / all) * 100)}%`)
    .join(" ");
  const drawn = [1, 2, 3, 0].filter((p) => codes.includes(p)).map((p) => PHASE_WORDS[p]);
  const blank = codes.includes(-1) && codes.some((c) => c >= 0) ? ["blank: no record kept"] : [];
  const parts = [`${mark} phases mixed in a ${formatSpan(columnUs)} column: ${split}`, ...drawn, ...blank] as string[];
  return { runs, legend: parts.join("  "), parts };
}

