// The Timeline screen's rows as text: a block's life across the columns of a step, a series as a
// row of eighth blocks, the range strip and the time axis. Pure functions (numbers in, text out),
// tested without a terminal.
import type { StepBand } from "../../profiler";

/** A band's cells: █ alive through the column, ▐ allocated in it, ▌ freed in it (or both: a short
 *  life), blank where it is not alive. ASCII: # [ ]. */
export function bandCells(b: Pick<StepBand, "from_us" | "to_us">, startUs: number, columnUs: number, columns: number, ascii = false): string {
  const [full, begins, ends] = ascii ? ["#", "[", "]"] : ["█", "▐", "▌"];
  // Times are µs since the epoch (about 2^50): compare with a margin, not to the last bit.
  const eps = columnUs * 1e-6;
  // A block freed in the microsecond it was allocated still shows, in its column.
  const instant = b.to_us <= b.from_us ? Math.floor((b.from_us - startUs) / columnUs) : -1;
  let out = "";
  for (let c = 0; c < columns; c++) {
    const a = startUs + c * columnUs;
    const z = a + columnUs;
    if (c === instant) out += ends;
    else if (!(b.from_us < z - eps && b.to_us > a + eps)) out += " ";
    else if (b.to_us < z - eps) out += ends;
    else if (b.from_us > a + eps) out += begins;
    else out += full;
  }
  return out;
}

const EIGHTHS = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
const ASCII_LEVELS = [" ", ".", ".", ":", ":", "=", "=", "#", "#"];

/** A series as one row of eighth blocks from `floor` (blank, or ▁ where the floor is above 0) to
 *  `max` (a value above the floor shows at least ▁); null stays blank: not known. */
export function sparkRow(values: readonly (number | null)[], max: number, ascii = false, floor = 0): string {
  const levels = ascii ? ASCII_LEVELS : EIGHTHS;
  const range = max - floor;
  let out = "";
  for (const v of values) {
    if (v === null || !(range > 0) || !(v > floor)) out += v !== null && floor > 0 && v >= floor ? levels[1] : " ";
    else out += levels[Math.max(1, Math.min(8, Math.round(((v - floor) / range) * 8)))]!;
  }
  return out;
}

/** The range strip: each run of one range as its name then a rule to the run's end ("train_step────"),
 *  cut where the run is shorter; blank where no range is open. Returned as runs for coloring. */
export function rangeRuns(names: readonly (string | null)[], ascii = false): { name: string | null; text: string }[] {
  const rule = ascii ? "-" : "─";
  const runs: { name: string | null; len: number }[] = [];
  for (const n of names) {
    const last = runs[runs.length - 1];
    if (last && last.name === n) last.len++;
    else runs.push({ name: n, len: 1 });
  }
  return runs.map(({ name, len }) => {
    if (name === null) return { name, text: " ".repeat(len) };
    // A run of one or two columns cannot hold a name: a mark says a range is there.
    if (len < 3) return { name, text: (ascii ? "|" : "│") + rule.repeat(len - 1) };
    const head = name.length + 1 <= len ? `${name} ` : `${name.slice(0, len - 1)}…`;
    return { name, text: (head + rule.repeat(len)).slice(0, len) };
  });
}

/** A span of time as the axis writes it: "850 µs", "12.4 ms", "1.25 s". */
export function formatSpan(us: number): string {
  if (us < 1000) return `${Math.round(us)} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

/** The time axis under `columns` cells spanning `spanUs` from the step's start: its start, middle
 *  and end labelled. */
export function stepAxis(columns: number, spanUs: number): string {
  const cells = new Array<string>(columns).fill(" ");
  const put = (at: number, text: string) => {
    const start = Math.max(0, Math.min(columns - text.length, at));
    for (let k = 0; k < text.length && start + k < columns; k++) cells[start + k] = text[k]!;
  };
  put(0, "0");
  const end = formatSpan(spanUs);
  if (columns >= 24) {
    const mid = formatSpan(spanUs / 2);
    put(Math.floor(columns / 2) - Math.floor(mid.length / 2), mid);
  }
  put(columns - end.length, end);
  return cells.join("");
}
