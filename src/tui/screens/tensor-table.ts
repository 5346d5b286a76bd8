// The Tensors screen's table, without drawing: its columns (which fit a width, each a sort), the
// live blocks filtered, grouped where they are alike (MemReporter's way: twenty activations of one
// size and shape are one row, "20 × 96.00 MiB", Enter opens it) or, where the stacks are known, by
// the line of the user's code that allocated them (w), and sorted by any column.
import type { BlockLine } from "../../profiler";
import { frameLabel, groupByUserFrame, type BlockStacks } from "../../profiler/user-frame";
import { sampledOut, settle, stackWeight } from "../../profiler/stack-weight";
import { cutMiddle, cutStart, formatBytes, phaseLabel } from "../format";

/** The table's sorts, one a column, in the columns' order. */
export const TENSOR_SORTS = ["size", "category", "name", "where", "shape", "dtype", "time", "phase", "step", "range"] as const;
export type TensorSort = (typeof TENSOR_SORTS)[number];

/** "768×2304", "scalar" for a 0-d tensor, "" where the agent gave no shape. */
export function formatShape(shape: number[] | null): string {
  if (shape === null) return "";
  return shape.length === 0 ? "scalar" : shape.join("×");
}

/** What NAME says of a block: its name, else where it was allocated (its category has a column
 *  of its own, so it is not said again). */
export function nameCell(b: BlockLine): string {
  if (b.name !== null) return b.name;
  if (b.category_source === "before_attach") return "(allocated before the attach)";
  const where = [b.phase === "other" ? null : phaseLabel(b.phase), b.range_name ? `in ${b.range_name}` : null, b.step === null ? "step unknown" : `step ${b.step}`].filter(Boolean);
  return `(${where.join(", ")})`;
}

/** A line of the table: a group of alike blocks (open or not), the blocks one line of the user's
 *  code allocated (w), or one block (alone, or in an open group). */
export type TensorRow =
  | { kind: "group"; key: string; blocks: BlockLine[]; open: boolean }
  | { kind: "frame"; key: string; label: string; blocks: BlockLine[]; bytes: number; open: boolean }
  | { kind: "block"; key: string; b: BlockLine; inGroup: boolean };

/** Where a block was allocated, as the table says it: its user frame ("train.py:42 step", the
 *  file's name; `full`, its path), else why there is none. */
export interface WhereOf {
  (b: BlockLine): string;
  full(b: BlockLine): string;
  /** The bytes a block stands for in a sum by line (profiler/stack-weight.ts: a sampled small
   *  block stands for more than itself). */
  weight(b: BlockLine): number;
}

/** Where a line of code or a path is cut (at its start): format.ts's, for the screens that imported it here. */
export { cutStart };

export const NO_FRAMES = "(no frames recorded)";
export const LIBRARY_ONLY = "(library code only)";
/** A block below the hook's threshold whose stack was not sampled: its line is unknown, not absent. */
export const NOT_SAMPLED = "(not sampled)";
export const BEFORE_ATTACH = "(before the attach)";

/** Where the blocks of `device` were allocated, from the stacks a snapshot (or the hook) recorded. */
export function whereOf(stacks: BlockStacks, device: number): WhereOf {
  const stackOf = (b: BlockLine) => b.stack || stacks.stackOf(device, b.address);
  const words = (b: BlockLine, short: boolean) => {
    // The block's own stack where the model has it (a replayed trace: exact at any moment), else
    // the snapshot's end state at its address.
    const stack = stackOf(b);
    if (stack === 0) {
      // Why none, where it is known: allocated before the agent came, or small and not sampled.
      if (b.category_source === "before_attach") return BEFORE_ATTACH;
      return sampledOut(b.size_bytes, stacks.sampling) ? NOT_SAMPLED : NO_FRAMES;
    }
    // A live stack's frames reach the manifest up to a sync after its first record: none yet.
    if (stacks.frames(stack).length === 0) return NO_FRAMES;
    const k = stacks.userFrame(stack);
    return k < 0 ? LIBRARY_ONLY : frameLabel(stacks.frames(stack)[k]!, short);
  };
  const weight = (b: BlockLine) => (stackOf(b) ? stackWeight(b.size_bytes, stacks.sampling) : b.size_bytes);
  return Object.assign((b: BlockLine) => words(b, true), { full: (b: BlockLine) => words(b, false), weight });
}

/** What the table shows beside the defaults: where blocks were allocated (a column, and the
 *  grouping by it), and whether any block has a shape or dtype (else those columns give way). */
export interface TableOptions {
  where?: WhereOf;
  shapes?: boolean;
  /** The most blocks a group of the table holds: the width of its count column (none where 1). */
  count?: number;
}

export interface TensorColumn {
  title: string;
  sort: TensorSort;
  width: number;
  right?: boolean;
  /** The cell of one block (`ageUs`: how long it has been live). */
  cell: (b: BlockLine, ageUs: number) => string;
  /** A space kept after the cell. */
  gap?: boolean;
  /** What the column orders by. */
  key: (b: BlockLine, ageUs: number) => number | string;
  /** How a cell too long for the column is cut (else at its end). */
  fit?: (s: string, width: number) => string;
  /** The count column: how many alike blocks a group holds ("315 ×"), beside SIZE. */
  count?: true;
}

// SIZE holds the longest figure formatBytes writes ("1023.99 MiB") and a space: never cut.
const SIZE: TensorColumn = { title: "SIZE ", sort: "size", width: 12, right: true, cell: (b) => `${formatBytes(b.size_bytes)} `, key: (b) => -b.size_bytes };
const CATEGORY: TensorColumn = { title: "CATEGORY", sort: "category", width: 16, cell: (b) => b.category, key: (b) => b.category };
const SHAPE: TensorColumn = { title: "SHAPE", sort: "shape", width: 13, cell: (b) => formatShape(b.shape), key: (b) => formatShape(b.shape) || "~" };
const DTYPE: TensorColumn = { title: "DTYPE", sort: "dtype", width: 10, cell: (b) => b.dtype ?? "", key: (b) => b.dtype ?? "~" };
const OPTIONAL: TensorColumn[] = [
  { title: "AGE", sort: "time", width: 8, right: true, cell: (_b, age) => `${(age / 1e6).toFixed(1)}s`, key: (_b, age) => age },
  { title: " PHASE", sort: "phase", width: 10, cell: (b) => ` ${phaseLabel(b.phase)}`, key: (b) => phaseLabel(b.phase) },
  { title: "STEP", sort: "step", width: 6, right: true, cell: (b) => (b.step === null ? "" : String(b.step)), key: (b) => -(b.step ?? -1) },
  { title: " RANGE", sort: "range", width: 19, cell: (b) => ` ${b.range_name ?? ""}`, key: (b) => b.range_name ?? "~" },
];

/** The count column for groups of up to `most` blocks: "315 ×" right-aligned, a click sorts by size. */
function countColumn(most: number): TensorColumn {
  return { title: "", sort: "size", width: String(most).length + 3, right: true, gap: true, cell: () => "", key: SIZE.key, count: true };
}

/** NAME keeps this much before the optional columns (age, phase, step, range) join. */
const MIN_NAME = 40;
/** NAME keeps this much before SHAPE and DTYPE join (below 80 columns they give way, DTYPE first). */
const MIN_NAME_NARROW = 16;

/** The columns that fit `width`: the count (where groups are), size, category and name always;
 *  ALLOCATED AT where stacks are known; shape and dtype where NAME still keeps MIN_NAME_NARROW
 *  (not where no block has one); age, phase, step and range where NAME
 *  still keeps MIN_NAME; NAME takes what is left, cut in its middle. */
export function tensorColumns(width: number, opts: TableOptions = {}): TensorColumn[] {
  const avail = width - 1;
  const lead = [...(opts.count && opts.count > 1 ? [countColumn(opts.count)] : []), SIZE, CATEGORY];
  let used = lead.reduce((s, c) => s + c.width, 0);
  const at: TensorColumn[] = [];
  if (opts.where) {
    const where = opts.where;
    const w = Math.max(12, Math.min(40, Math.floor((avail - used) / 2)));
    // Cut at its start: the line and the function stay in view.
    at.push({ title: "ALLOCATED AT", sort: "where", width: w, cell: (b) => cutStart(where(b), w - 1), key: (b) => where.full(b), gap: true });
    used += w;
  }
  const shapes: TensorColumn[] = [];
  // Empty columns hold nothing: where no block has a shape or dtype, NAME has their room.
  for (const c of opts.shapes !== false ? [SHAPE, DTYPE] : []) {
    if (used + c.width + MIN_NAME_NARROW > avail) break;
    shapes.push(c);
    used += c.width;
  }
  const extra: TensorColumn[] = [];
  for (const c of OPTIONAL) {
    if (used + c.width + MIN_NAME > avail) break;
    extra.push(c);
    used += c.width;
  }
  // A space after the name, where it is cut, before SHAPE.
  const name: TensorColumn = { title: "NAME", sort: "name", width: Math.max(8, avail - used), cell: nameCell, key: (b) => nameCell(b).toLowerCase(), gap: true, fit: cutMiddle };
  return [...lead, name, ...at, ...shapes, ...extra];
}

/** Blocks alike for the table: one size, category, name (or none), shape and dtype. */
const groupKey = (b: BlockLine) => `${b.size_bytes}|${b.category}|${b.name ?? ""}|${formatShape(b.shape)}|${b.dtype ?? ""}`;

/** Whether a block is kept by the filter (its name, category, phase, range, dtype, shape, and
 *  where it was allocated where that is known). */
export function filterBlocks(blocks: BlockLine[], filter: string, where?: WhereOf): BlockLine[] {
  const f = filter.toLowerCase();
  if (!f) return blocks;
  return blocks.filter((b) => `${nameCell(b)} ${b.category} ${phaseLabel(b.phase)} ${b.range_name ?? ""} ${b.dtype ?? ""} ${formatShape(b.shape)} ${where ? where.full(b) : ""}`.toLowerCase().includes(f));
}

/**
 * The table's rows: blocks grouped by groupKey, the groups ordered by `sort` (on their first
 * block; equal keys by size, then address), an open group followed by its blocks.
 */
export function tensorRows(blocks: BlockLine[], sort: TensorSort, reverse: boolean, open: ReadonlySet<string>, lastUs: number, opts: TableOptions & { byFrame?: boolean } = {}): TensorRow[] {
  if (opts.byFrame && opts.where) return frameRows(blocks, sort, reverse, open, lastUs, opts.where);
  const groups = new Map<string, BlockLine[]>();
  for (const b of blocks) {
    const k = groupKey(b);
    const g = groups.get(k);
    if (g) g.push(b);
    else groups.set(k, [b]);
  }
  const col = [...tensorColumns(Infinity, opts)].find((c) => c.sort === sort) ?? SIZE;
  const dir = reverse ? -1 : 1;
  const cmp = (x: BlockLine, y: BlockLine) => {
    const a = col.key(x, lastUs - x.time_us);
    const b = col.key(y, lastUs - y.time_us);
    return (a < b ? -dir : a > b ? dir : 0) || y.size_bytes - x.size_bytes || x.address - y.address;
  };
  const list = [...groups.entries()].map(([key, bs]) => ({ key, bs: bs.sort(cmp) }));
  list.sort((p, q) => cmp(p.bs[0]!, q.bs[0]!));
  const rows: TensorRow[] = [];
  for (const { key, bs } of list) {
    if (bs.length === 1) {
      rows.push({ kind: "block", key, b: bs[0]!, inGroup: false });
      continue;
    }
    rows.push({ kind: "group", key, blocks: bs, open: open.has(key) });
    if (open.has(key)) for (const b of bs) rows.push({ kind: "block", key, b, inGroup: true });
  }
  return rows;
}

/**
 * The rows by user frame (w): one a line of the user's code, its blocks' bytes and count summed,
 * ordered by `sort` (size: the summed bytes; else on their first block), an open one followed by
 * its blocks.
 */
function frameRows(blocks: BlockLine[], sort: TensorSort, reverse: boolean, open: ReadonlySet<string>, lastUs: number, where: WhereOf): TensorRow[] {
  const col = [...tensorColumns(Infinity, { where })].find((c) => c.sort === sort) ?? SIZE;
  const dir = reverse ? -1 : 1;
  const cmp = (x: BlockLine, y: BlockLine) => {
    const a = col.key(x, lastUs - x.time_us);
    const b = col.key(y, lastUs - y.time_us);
    return (a < b ? -dir : a > b ? dir : 0) || y.size_bytes - x.size_bytes || x.address - y.address;
  };
  // The JSON's by_user_frame groups the same way (profiler/user-frame.ts). A sampled block stands
  // for the bytes of the blocks of its size that were not (where.weight): those come out of the
  // unsampled ones' row, so that the rows still add up to the blocks listed.
  const groups = groupByUserFrame(blocks, where.full, (b) => b.size_bytes);
  const unsampled = groups.find((g) => g.label === NOT_SAMPLED);
  const lines = groups.filter((g) => g !== unsampled);
  const s = settle(
    lines.map((g) => g.bytes),
    lines.map((g) => g.items.reduce((n, b) => n + where.weight(b), 0)),
    unsampled?.bytes ?? 0,
  );
  lines.forEach((g, i) => (g.bytes = s.bytes[i]!));
  if (unsampled) unsampled.bytes = s.left;
  const list = groups.map((g) => ({ key: `w|${g.label}`, label: where(g.items[0]!), bytes: g.bytes, bs: g.items.sort(cmp) }));
  list.sort((p, q) => (sort === "size" ? dir * (q.bytes - p.bytes) : cmp(p.bs[0]!, q.bs[0]!)) || q.bytes - p.bytes || p.key.localeCompare(q.key));
  const rows: TensorRow[] = [];
  for (const g of list) {
    rows.push({ kind: "frame", key: g.key, label: g.label, blocks: g.bs, bytes: g.bytes, open: open.has(g.key) });
    if (open.has(g.key)) for (const b of g.bs) rows.push({ kind: "block", key: g.key, b, inGroup: true });
  }
  return rows;
}

/** A frame row's cell in a column: SIZE the summed bytes, NAME how many blocks, ALLOCATED AT the
 *  line; else what its blocks share, or "mixed". */
export function frameCell(c: TensorColumn, row: Extract<TensorRow, { kind: "frame" }>, lastUs: number): string {
  // The count column stays empty: NAME says how many, and "12 ×" would read as 12 times SIZE.
  if (c.count) return "";
  if (c.sort === "size") return `${formatBytes(row.bytes)} `;
  if (c.sort === "name") return `${row.blocks.length} block${row.blocks.length === 1 ? "" : "s"}`;
  if (c.sort === "where") return cutStart(row.label, c.width - 1);
  return groupCell(c, row.blocks, lastUs);
}

/** A group's cell in a column: the value its blocks share, else "mixed"; the count column says how many. */
export function groupCell(c: TensorColumn, blocks: BlockLine[], lastUs: number): string {
  if (c.count) return `${blocks.length} ×`;
  const cells = new Set(blocks.map((b) => c.cell(b, lastUs - b.time_us)));
  if (cells.size === 1) return [...cells][0]!;
  return c.sort === "name" ? `(${blocks.length} unnamed, Enter lists them)` : c.title.startsWith(" ") ? " mixed" : "mixed";
}

/** Per category, the bytes and blocks of `blocks` (the filter's, where one is set), largest first. */
export function categoryTotals(blocks: BlockLine[]): { category: string; bytes: number; blocks: number; share: number }[] {
  const by = new Map<string, { bytes: number; blocks: number }>();
  let total = 0;
  for (const b of blocks) {
    const t = by.get(b.category) ?? by.set(b.category, { bytes: 0, blocks: 0 }).get(b.category)!;
    t.bytes += b.size_bytes;
    t.blocks++;
    total += b.size_bytes;
  }
  return [...by.entries()].map(([category, t]) => ({ category, ...t, share: total ? t.bytes / total : 0 })).sort((a, b) => b.bytes - a.bytes);
}
