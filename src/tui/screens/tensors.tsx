// Tensors: live blocks with their names, shapes and dtypes, alike blocks grouped (Enter opens a
// group), totals per category (MemReporter, live); the filter counts in every figure. Where the
// stacks were recorded (a snapshot's frames), where each block was allocated: the line of the
// user's code (ALLOCATED AT), the blocks grouped by it (w), a block's whole stack (Enter, Esc
// back: ./tensor-stack.tsx). The table itself, without drawing: ./tensor-table.ts.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import type { NamesStatus } from "../../collect/name-requests";
import { blocks, categories, type BlockLine } from "../../profiler";
import { color, formatBytes, pad, phaseLabel } from "../format";
import { counted } from "../../words";
import { cycle, isChar, isKey, type ScreenSpec } from "../screen-spec";
import type { UiState } from "../ui-state";
import { categoryTotals, filterBlocks, frameCell, groupCell, TENSOR_SORTS, tensorColumns, tensorRows, whereOf, type TableOptions, type TensorColumn, type TensorSort } from "./tensor-table";
import { stackRows, TensorStack } from "./tensor-stack";
import { momentBlocks, tensorsMoment, type TensorsMoment } from "../moment";

export { formatShape } from "./tensor-table";

/** Blocks the table reads (largest first): more would cost every frame and fit no screen. */
const TABLE_LIMIT = 5000;

/** Where the names came from and what they cost, in one line. */
function namesLine(s: NamesStatus | undefined): string {
  if (!s) return "";
  if (s.error) return `names: ${s.error}`;
  if (s.at_ms === null) return s.requests ? "names: asking the agent…" : "";
  const cost = s.agent_ms === null ? "" : `, ${s.agent_ms.toFixed(1)} ms in the agent`;
  return `names: ${s.matched} of ${s.tensors} tensors named at step ${s.step ?? "?"} (${s.requests} requests, the last ${s.reason}${cost})`;
}

/** What the table shows for `pm`: where its blocks were allocated (where stacks were recorded),
 *  and whether any block has a shape or dtype. */
export function tableOptions(pm: ProcessModel): TableOptions {
  return optionsOf(pm, liveView(pm));
}

/** The live blocks the table reads, largest first. */
const liveView = (pm: ProcessModel) => blocks(pm.model, { sort: "size", limit: TABLE_LIMIT });

/** tableOptions of the live blocks `view` (read once a frame: each read makes a line of every block). */
function optionsOf(pm: ProcessModel, view: ReturnType<typeof liveView>): TableOptions {
  return { where: pm.model.stacks ? whereOf(pm.model.stacks, view.device) : undefined, shapes: view.blocks.some((b) => b.shape !== null || b.dtype !== null) };
}

/** The keys of the table, in one line under its title. */
export function keysLine(stacks: boolean, byFrame: boolean): string {
  if (!stacks) return "Enter: a group's blocks  s I: sort  /: filter";
  return `Enter: group / stack  w: ${byFrame ? "alike blocks" : "group by your line"}  s I: sort  /: filter`;
}

/** The table's rows (filtered, grouped, sorted), the totals above it, its header line from the top
 *  of the screen, and the first row shown. */
export function tensorsLayout(pm: ProcessModel, height: number, sort: TensorSort, reverse: boolean, filter: string, selected: number, open: readonly string[] = [], byFrame = false, moment: TensorsMoment = { kind: "now" }) {
  const lastUs = pm.model.devices[0]?.lastTime_us ?? 0;
  const live = liveView(pm);
  const opts = optionsOf(pm, live);
  // Now: the live blocks; at a peak or a past step's end: the blocks alive then (src/tui/moment.ts).
  const past = moment.kind === "now" ? null : momentBlocks(pm, moment);
  const view = past ? { blocks: past.lines.slice(0, TABLE_LIMIT), total_bytes: past.bytes, total_blocks: past.lines.length } : live;
  const kept = filterBlocks(view.blocks, filter, opts.where);
  const rows = tensorRows(kept, sort, reverse, new Set(open), lastUs, { ...opts, byFrame });
  // The count column is as wide as the largest group's count.
  opts.count = rows.reduce((n, r) => (r.kind === "group" ? Math.max(n, r.blocks.length) : n), 0);
  // The totals: every block's; with a filter, those of the blocks it keeps, all of them.
  const all = () => (past ? past.lines : blocks(pm.model, { sort: "size", limit: Infinity }).blocks);
  const totals = filter ? categoryTotals(filterBlocks(all(), filter, opts.where)) : past ? categoryTotals(past.lines) : categories(pm.model).categories.filter((c) => c.bytes > 0);
  const bytes = filter ? totals.reduce((s, c) => s + c.bytes, 0) : view.total_bytes;
  const count = filter ? totals.reduce((s, c) => s + c.blocks, 0) : view.total_blocks;
  const names = namesLine(pm.names?.status);
  // Lines above the category lines: the title, the keys, the names' line.
  const above = 2 + (names ? 1 : 0);
  // Category lines give way to the table on a short terminal (at least 5 rows of it).
  const catRoom = Math.max(0, Math.min(totals.length, height - 1 - above - 5));
  const catLines = totals.slice(0, catRoom);
  const room = Math.max(3, height - catLines.length - 1 - above);
  const first = Math.max(0, Math.min(selected - room + 1, rows.length - room));
  const keys = `${keysLine(!!opts.where, byFrame && !!opts.where)}  P: ${moment.kind === "now" ? "peak" : "next"}`;
  return { rows, catLines, bytes, count, names, room, first, lastUs, opts, keys, past, headerLine: above + catLines.length };
}

/** The row (its index in the table) under line `line` of the screen, or null. */
export function tensorRowAt(pm: ProcessModel | undefined, height: number, ui: UiState, selected: number, line: number): number | null {
  if (!pm || pm.model.devices.length === 0) return null;
  const l = tensorsLayout(pm, height, ui.tensorSort, ui.tensorReverse, ui.filter, selected, ui.tensorOpen, ui.tensorByFrame, tensorsMoment(ui));
  const k = line - l.headerLine - 1;
  return k >= 0 && k < l.room && l.first + k < l.rows.length ? l.first + k : null;
}

/** The sort whose column header is at column `x` (from 1) on line `line`, or null. */
export function tensorSortAt(pm: ProcessModel | undefined, width: number, height: number, ui: UiState, selected: number, line: number, x: number): TensorSort | null {
  if (!pm || pm.model.devices.length === 0) return null;
  const l = tensorsLayout(pm, height, ui.tensorSort, ui.tensorReverse, ui.filter, selected, ui.tensorOpen, ui.tensorByFrame, tensorsMoment(ui));
  if (line !== l.headerLine) return null;
  let at = 0;
  for (const c of tensorColumns(width, l.opts)) {
    if (x - 1 >= at && x - 1 < at + c.width) return c.sort;
    at += c.width;
  }
  return null;
}

/** The sorted column's title with its direction: ▼ as the sort first orders, ▲ reversed. */
function titleOf(c: TensorColumn, sort: TensorSort, reverse: boolean): string {
  if (c.sort !== sort) return c.title;
  return `${c.title.trimEnd()}${reverse ? "▲" : "▼"}${c.title.endsWith(" ") ? " " : ""}`;
}

export function TensorsScreen(props: { pm: ProcessModel | undefined; width: number; height: number; sort: TensorSort; reverse: boolean; filter: string; selected: number; open?: readonly string[]; byFrame?: boolean; moment?: TensorsMoment }) {
  const { pm, width, height } = props;
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  const { rows, catLines, bytes, count, names, room, first, lastUs, opts, keys, past } = tensorsLayout(pm, height, props.sort, props.reverse, props.filter, props.selected, props.open, props.byFrame, props.moment);
  const cols = tensorColumns(width, opts);
  const fit = (c: TensorColumn, s: string, w: number) => pad(c.fit ? c.fit(s, w) : s, w, c.right);
  const line = (cell: (c: TensorColumn) => string) => cols.map((c) => (c.gap ? `${fit(c, cell(c), c.width - 1)} ` : fit(c, cell(c), c.width))).join("");
  const what = past ? past.heading.replace(/:.*$/, "") : "Live memory";
  const heading = props.filter ? `${what} kept by the filter "${props.filter}": ${formatBytes(bytes)} in ${counted(count, "block")}` : past ? past.heading : `Live memory by category: ${formatBytes(bytes)} in ${counted(count, "block")}`;
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate-end" color={past ? color("yellow") : undefined}>{heading}</Text>
      <Text dimColor>{pad(keys, width - 1)}</Text>
      {names ? <Text dimColor>{pad(names, width - 1)}</Text> : null}
      {catLines.map((c) => (
        <Text key={c.category}>
          {pad(`  ${c.category}`, 20)}{pad(formatBytes(c.bytes), 12, true)}{pad(counted(c.blocks, "block"), 14, true)}{pad(`${Math.round(c.share * 100)}%`, 6, true)}
        </Text>
      ))}
      <Text>
        {cols.map((c, i) =>
          c.sort === props.sort && !c.count ? (
            <Text key={i} bold underline color={color("cyan")}>{pad(titleOf(c, props.sort, props.reverse), c.width, c.right)}</Text>
          ) : (
            <Text key={i} inverse>{pad(c.title, c.width, c.right)}</Text>
          ),
        )}
      </Text>
      {rows.length === 0 ? <Text dimColor>{past?.missing ?? (props.filter ? "no block kept by the filter" : past ? "no blocks" : "no live blocks")}</Text> : null}
      {rows.slice(first, first + room).map((r, i) => {
        const b = r.kind === "block" ? r.b : r.blocks[0]!;
        const text =
          r.kind === "group"
            ? line((c) => (c.sort === "name" && r.open ? `▾ ${groupCell(c, r.blocks, lastUs)}` : groupCell(c, r.blocks, lastUs)))
            : r.kind === "frame"
              ? line((c) => (c.sort === "name" && r.open ? `▾ ${frameCell(c, r, lastUs)}` : frameCell(c, r, lastUs)))
              : line((c) => (c.sort === "name" && r.inGroup ? `  ${c.cell(b, lastUs - b.time_us)}` : c.cell(b, lastUs - b.time_us)));
        return (
          <Text key={r.kind === "block" ? `b${r.b.address}` : `g${r.key}`} inverse={first + i === props.selected} bold={r.kind !== "block"} dimColor={r.kind !== "frame" && b.name === null} color={color(r.kind === "frame" ? "white" : b.category === "activation" ? "magenta" : b.category === "parameter" ? "cyan" : "white")}>
            {text}
          </Text>
        );
      })}
    </Box>
  );
}

/** Sorts the table by `sort`; the same sort again reverses it. */
function sortBy(ui: UiState, sort: string): void {
  if (!(TENSOR_SORTS as readonly string[]).includes(sort)) return;
  if (ui.tensorSort === sort) ui.tensorReverse = !ui.tensorReverse;
  else (ui.tensorSort = sort as TensorSort), (ui.tensorReverse = false);
}

/** The opened stack's block, where the process has stacks (a block's stack stays open only there). */
const stackOpen = (ui: UiState, pm: ProcessModel | undefined) => (ui.tensorStack && pm?.model.stacks ? ui.tensorStack : null);

/** The Tensors screen in the frame: its table selects, sorts (s, I, a header click on any column),
 *  Enter opens or closes the selected group of alike blocks; where stacks were recorded, w groups
 *  the blocks by the line that allocated them and Enter on a block opens its stack (Esc: back). */
export const tensorsScreen = {
  id: "tensors",
  key: "3",
  title: "Tensors",
  component: (p) => {
    const open = stackOpen(p.ui, p.pm);
    if (open && p.pm) return <TensorStack pm={p.pm} address={open.address} width={p.width} height={p.height} selected={p.selected} />;
    return <TensorsScreen pm={p.pm} width={p.width} height={p.height} sort={p.ui.tensorSort} reverse={p.ui.tensorReverse} filter={p.ui.filter} selected={p.selected} open={p.ui.tensorOpen} byFrame={p.ui.tensorByFrame} moment={tensorsMoment(p.ui)} />;
  },
  rows: (p) => {
    const open = stackOpen(p.ui, p.pm);
    if (open && p.pm) return stackRows(p.pm, open.address);
    return p.pm && p.pm.model.devices.length ? tensorsLayout(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, p.ui.tensorOpen, p.ui.tensorByFrame, tensorsMoment(p.ui)).rows.length : 0;
  },
  // F3 finds a row by what it shows: a block's name, category, shape, dtype, phase and range; a
  // group's (its first block's, with its count); a line's (w) label. A stack opened: none.
  rowTexts: (p) => {
    if (stackOpen(p.ui, p.pm) || !p.pm || !p.pm.model.devices.length) return [];
    const block = (b: BlockLine) => [b.name ?? "", b.category, b.shape ? b.shape.join("×") : "", b.dtype ?? "", phaseLabel(b.phase), b.range_name ?? ""].join(" ");
    return tensorsLayout(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, p.ui.tensorOpen, p.ui.tensorByFrame, tensorsMoment(p.ui)).rows.map((r) =>
      r.kind === "block" ? block(r.b) : r.kind === "group" ? `${r.blocks.length} × ${block(r.blocks[0]!)}` : r.label,
    );
  },
  rowAt: (p, line) => (stackOpen(p.ui, p.pm) ? null : tensorRowAt(p.pm, p.height, p.ui, p.selected, line)),
  sortAt: (p, line, x) => (stackOpen(p.ui, p.pm) ? null : tensorSortAt(p.pm, p.width, p.height, p.ui, p.selected, line, x)),
  sortBy,
  sorts: (p) => [...new Set(tensorColumns(p.width, p.pm && p.pm.model.devices.length ? tableOptions(p.pm) : {}).map((c) => c.sort))],
  onKey: (ui, key, ctx) => {
    const pm = ctx.pm(ui);
    const open = stackOpen(ui, pm);
    if (open) {
      if (isKey(key, "escape") || isKey(key, "backspace")) return (ui.selected[ui.screen] = open.back), (ui.tensorStack = null), true;
      return isKey(key, "return") || isChar(key, "w") || isChar(key, "s") || isChar(key, "I");
    }
    if (isChar(key, "s")) return sortBy(ui, cycle(ctx.sorts(ui), ui.tensorSort)), true;
    if (isChar(key, "I")) return sortBy(ui, ui.tensorSort), true;
    if (isChar(key, "w")) {
      if (!pm?.model.stacks) return ctx.ctl.say("w: where blocks were allocated is known where stacks were recorded (a snapshot taken with stacks; a program's agent records them unless GPUMEM_TUI_STACKS=0 or its interpreter is not supported: its notes say why)"), true;
      ui.tensorByFrame = !ui.tensorByFrame;
      ui.selected[ui.screen] = 0;
      return true;
    }
    if (!isKey(key, "return")) return false;
    if (!pm || pm.model.devices.length === 0) return true;
    const selected = ui.selected[ui.screen]!;
    const row = tensorsLayout(pm, 1000, ui.tensorSort, ui.tensorReverse, ui.filter, 0, ui.tensorOpen, ui.tensorByFrame, tensorsMoment(ui)).rows[selected];
    if (!row) return true;
    if (row.kind === "block" && pm.model.stacks) {
      // The stack opens at its user frame (or its top where it has none).
      ui.tensorStack = { address: row.b.address, back: selected };
      const stack = row.b.stack || pm.model.stacks.stackOf(blocks(pm.model, { limit: 0 }).device, row.b.address);
      ui.selected[ui.screen] = stack ? Math.max(0, pm.model.stacks.userFrame(stack)) : 0;
      return true;
    }
    if (row.kind === "block" && !row.inGroup) return true;
    const at = ui.tensorOpen.indexOf(row.key);
    ui.tensorOpen = at >= 0 ? ui.tensorOpen.filter((k) => k !== row.key) : [...ui.tensorOpen, row.key];
    return true;
  },
} as const satisfies ScreenSpec;
