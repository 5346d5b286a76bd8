// Tensors: live blocks with their names, shapes and dtypes, alike blocks grouped (Enter opens a
// group), totals per category (MemReporter, live); the filter counts in every figure. The table
// itself, without drawing: ./tensor-table.ts.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import type { NamesStatus } from "../../collect/name-requests";
import { blocks, categories } from "../../profiler";
import { color, formatBytes, pad } from "../format";
import { cycle, isChar, isKey, type ScreenSpec } from "../screen-spec";
import type { UiState } from "../ui-state";
import { categoryTotals, filterBlocks, groupCell, TENSOR_SORTS, tensorColumns, tensorRows, type TensorColumn, type TensorSort } from "./tensor-table";

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

/** The table's rows (filtered, grouped, sorted), the totals above it, its header line from the top
 *  of the screen, and the first row shown. */
export function tensorsLayout(pm: ProcessModel, height: number, sort: TensorSort, reverse: boolean, filter: string, selected: number, open: readonly string[] = []) {
  const view = blocks(pm.model, { sort: "size", limit: TABLE_LIMIT });
  const lastUs = pm.model.devices[0]?.lastTime_us ?? 0;
  const kept = filterBlocks(view.blocks, filter);
  const rows = tensorRows(kept, sort, reverse, new Set(open), lastUs);
  // The totals: every live block's; with a filter, those of the blocks it keeps, all of them.
  const totals = filter ? categoryTotals(filterBlocks(blocks(pm.model, { sort: "size", limit: Infinity }).blocks, filter)) : categories(pm.model).categories.filter((c) => c.bytes > 0);
  const bytes = filter ? totals.reduce((s, c) => s + c.bytes, 0) : view.total_bytes;
  const count = filter ? totals.reduce((s, c) => s + c.blocks, 0) : view.total_blocks;
  const names = namesLine(pm.names?.status);
  // Category lines give way to the table on a short terminal (at least 5 rows of it).
  const catRoom = Math.max(0, Math.min(totals.length, height - 2 - (names ? 1 : 0) - 5));
  const catLines = totals.slice(0, catRoom);
  const room = Math.max(3, height - catLines.length - 2 - (names ? 1 : 0));
  const first = Math.max(0, Math.min(selected - room + 1, rows.length - room));
  return { rows, catLines, bytes, count, names, room, first, lastUs, headerLine: 1 + (names ? 1 : 0) + catLines.length };
}

/** The row (its index in the table) under line `line` of the screen, or null. */
export function tensorRowAt(pm: ProcessModel | undefined, height: number, ui: UiState, selected: number, line: number): number | null {
  if (!pm || pm.model.devices.length === 0) return null;
  const l = tensorsLayout(pm, height, ui.tensorSort, ui.tensorReverse, ui.filter, selected, ui.tensorOpen);
  const k = line - l.headerLine - 1;
  return k >= 0 && k < l.room && l.first + k < l.rows.length ? l.first + k : null;
}

/** The sort whose column header is at column `x` (from 1) on line `line`, or null. */
export function tensorSortAt(pm: ProcessModel | undefined, width: number, height: number, ui: UiState, selected: number, line: number, x: number): TensorSort | null {
  if (!pm || pm.model.devices.length === 0) return null;
  if (line !== tensorsLayout(pm, height, ui.tensorSort, ui.tensorReverse, ui.filter, selected, ui.tensorOpen).headerLine) return null;
  let at = 0;
  for (const c of tensorColumns(width)) {
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

export function TensorsScreen(props: { pm: ProcessModel | undefined; width: number; height: number; sort: TensorSort; reverse: boolean; filter: string; selected: number; open?: readonly string[] }) {
  const { pm, width, height } = props;
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  const { rows, catLines, bytes, count, names, room, first, lastUs } = tensorsLayout(pm, height, props.sort, props.reverse, props.filter, props.selected, props.open);
  const cols = tensorColumns(width);
  const line = (cell: (c: TensorColumn) => string) => cols.map((c) => (c.gap ? `${pad(cell(c), c.width - 1, c.right)} ` : pad(cell(c), c.width, c.right))).join("");
  const heading = props.filter ? `Live memory kept by the filter "${props.filter}": ${formatBytes(bytes)} in ${count} blocks` : `Live memory by category: ${formatBytes(bytes)} in ${count} blocks`;
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate-end">{heading}</Text>
      {names ? <Text dimColor>{pad(names, width - 1)}</Text> : null}
      {catLines.map((c) => (
        <Text key={c.category}>
          {pad(`  ${c.category}`, 20)}{pad(formatBytes(c.bytes), 12, true)}{pad(`${c.blocks} blocks`, 14, true)}{pad(`${Math.round(c.share * 100)}%`, 6, true)}
        </Text>
      ))}
      <Text>
        {cols.map((c, i) =>
          c.sort === props.sort ? (
            <Text key={i} bold underline color={color("cyan")}>{pad(titleOf(c, props.sort, props.reverse), c.width, c.right)}</Text>
          ) : (
            <Text key={i} inverse>{pad(c.title, c.width, c.right)}</Text>
          ),
        )}
      </Text>
      {rows.length === 0 ? <Text dimColor>{props.filter ? "no block kept by the filter" : "no live blocks"}</Text> : null}
      {rows.slice(first, first + room).map((r, i) => {
        const b = r.kind === "group" ? r.blocks[0]! : r.b;
        const text =
          r.kind === "group"
            ? line((c) => (c.sort === "name" && r.open ? `▾ ${groupCell(c, r.blocks, lastUs)}` : groupCell(c, r.blocks, lastUs)))
            : line((c) => (c.sort === "name" && r.inGroup ? `  ${c.cell(b, lastUs - b.time_us)}` : c.cell(b, lastUs - b.time_us)));
        return (
          <Text key={r.kind === "group" ? `g${r.key}` : `b${r.b.address}`} inverse={first + i === props.selected} bold={r.kind === "group"} dimColor={b.name === null} color={color(b.category === "activation" ? "magenta" : b.category === "parameter" ? "cyan" : "white")}>
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

/** The Tensors screen in the frame: its table selects, sorts (s, I, a header click on any column),
 *  and Enter opens or closes the selected group of alike blocks. */
export const tensorsScreen = {
  id: "tensors",
  key: "3",
  title: "Tensors",
  component: (p) => <TensorsScreen pm={p.pm} width={p.width} height={p.height} sort={p.ui.tensorSort} reverse={p.ui.tensorReverse} filter={p.ui.filter} selected={p.selected} open={p.ui.tensorOpen} />,
  rows: (p) => (p.pm && p.pm.model.devices.length ? tensorsLayout(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, p.ui.tensorOpen).rows.length : 0),
  rowAt: (p, line) => tensorRowAt(p.pm, p.height, p.ui, p.selected, line),
  sortAt: (p, line, x) => tensorSortAt(p.pm, p.width, p.height, p.ui, p.selected, line, x),
  sortBy,
  sorts: (p) => tensorColumns(p.width).map((c) => c.sort),
  onKey: (ui, key, ctx) => {
    if (isChar(key, "s")) return sortBy(ui, cycle(ctx.sorts(ui), ui.tensorSort)), true;
    if (isChar(key, "I")) return sortBy(ui, ui.tensorSort), true;
    if (!isKey(key, "return")) return false;
    const pm = ctx.pm(ui);
    if (!pm || pm.model.devices.length === 0) return true;
    const row = tensorsLayout(pm, 1000, ui.tensorSort, ui.tensorReverse, ui.filter, 0, ui.tensorOpen).rows[ui.selected[ui.screen]!];
    if (!row || (row.kind === "block" && !row.inGroup)) return true;
    const at = ui.tensorOpen.indexOf(row.key);
    ui.tensorOpen = at >= 0 ? ui.tensorOpen.filter((k) => k !== row.key) : [...ui.tensorOpen, row.key];
    return true;
  },
} as const satisfies ScreenSpec;
