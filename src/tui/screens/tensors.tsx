// Tensors: live blocks with their names, shapes and dtypes, totals per category (MemReporter, live).
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import type { NamesStatus } from "../../collect/names";
import { blocks, categories, type BlockLine } from "../../profiler";
import { color, formatBytes, pad, phaseLabel } from "../format";
import { cycle, isChar, type ScreenSpec } from "../screen-spec";
import type { UiState } from "../ui-state";

export const TENSOR_SORTS = ["size", "time", "address"] as const;
export type TensorSort = (typeof TENSOR_SORTS)[number];

/** "768×2304", "scalar" for a 0-d tensor, "" where the agent gave no shape. */
export function formatShape(shape: number[] | null): string {
  if (shape === null) return "";
  return shape.length === 0 ? "scalar" : shape.join("×");
}

/** Where the names came from and what they cost, in one line. */
function namesLine(s: NamesStatus | undefined): string {
  if (!s) return "";
  if (s.error) return `names: ${s.error}`;
  if (s.at_ms === null) return s.requests ? "names: asking the agent…" : "";
  const cost = s.agent_ms === null ? "" : `, ${s.agent_ms.toFixed(1)} ms in the agent`;
  return `names: ${s.matched} of ${s.tensors} tensors named at step ${s.step ?? "?"} (${s.requests} requests, the last ${s.reason}${cost})`;
}

interface Column {
  title: string;
  /** The sort this column stands for. */
  sort?: TensorSort;
  width: number;
  right?: boolean;
  cell: (b: BlockLine, ageUs: number) => string;
}

/** The columns that fit `width`: size, category, name, shape and dtype always; then age, phase,
 *  step and range as room allows. The name takes what is left. */
function columns(width: number, sort: TensorSort, reverse = false): { cols: Column[]; nameWidth: number } {
  const fixed: Column[] = [
    { title: "SIZE ", width: 11, right: true, sort: "size", cell: (b) => `${formatBytes(b.size_bytes)} ` },
    { title: "CATEGORY", width: 16, cell: (b) => b.category },
  ];
  const tail: Column[] = [
    { title: "SHAPE", width: 14, cell: (b) => formatShape(b.shape) },
    { title: "DTYPE", width: 10, cell: (b) => b.dtype ?? "" },
  ];
  const optional: Column[] = [
    { title: "AGE", width: 8, right: true, sort: "time", cell: (_b, age) => `${(age / 1e6).toFixed(1)}s` },
    { title: " PHASE", width: 10, cell: (b) => ` ${phaseLabel(b.phase)}` },
    { title: "STEP", width: 6, right: true, cell: (b) => (b.step === null ? "" : String(b.step)) },
    { title: " RANGE", width: 19, cell: (b) => ` ${b.range_name ?? ""}` },
  ];
  const avail = width - 1;
  const minName = 24;
  let used = [...fixed, ...tail].reduce((s, c) => s + c.width, 0);
  const extra: Column[] = [];
  for (const c of optional) {
    if (used + c.width + minName > avail) break;
    extra.push(c);
    used += c.width;
  }
  const nameWidth = Math.max(8, avail - used);
  const name: Column = { title: `NAME (sort: ${sort}${reverse ? ", reversed" : ""})`, width: nameWidth, cell: (b) => b.label };
  return { cols: [...fixed, name, ...tail, ...extra], nameWidth };
}

/** Larger (or newer) first: ▼; reversed: ▲. */
function arrow(reverse: boolean): string {
  return reverse ? "▲" : "▼";
}

/** The table's rows (filtered), its header line from the top of the screen, and the first row shown. */
export function tensorsLayout(pm: ProcessModel, height: number, sort: TensorSort, reverse: boolean, filter: string, selected: number) {
  const cats = categories(pm.model);
  const view = blocks(pm.model, { sort, reverse, limit: 5000 });
  const f = filter.toLowerCase();
  const rows = f ? view.blocks.filter((b) => `${b.label} ${b.category} ${phaseLabel(b.phase)} ${b.range_name ?? ""} ${b.dtype ?? ""}`.toLowerCase().includes(f)) : view.blocks;
  const catLines = cats.categories.filter((c) => c.bytes > 0);
  const names = namesLine(pm.names?.status);
  const room = Math.max(3, height - catLines.length - 5 - (names ? 1 : 0));
  const first = Math.max(0, Math.min(selected - room + 1, rows.length - room));
  return { cats, view, rows, catLines, names, room, first, headerLine: 1 + (names ? 1 : 0) + catLines.length };
}

/** The block (its index in the table) under line `line` of the screen, or null. */
export function tensorRowAt(pm: ProcessModel | undefined, height: number, sort: TensorSort, reverse: boolean, filter: string, selected: number, line: number): number | null {
  if (!pm || pm.model.devices.length === 0) return null;
  const l = tensorsLayout(pm, height, sort, reverse, filter, selected);
  const k = line - l.headerLine - 1;
  return k >= 0 && k < l.room && l.first + k < l.rows.length ? l.first + k : null;
}

/** The sort whose column header is at column `x` (from 1) on line `line`, or null. */
export function tensorSortAt(pm: ProcessModel | undefined, width: number, height: number, sort: TensorSort, reverse: boolean, filter: string, selected: number, line: number, x: number): TensorSort | null {
  if (!pm || pm.model.devices.length === 0) return null;
  if (line !== tensorsLayout(pm, height, sort, reverse, filter, selected).headerLine) return null;
  let at = 0;
  for (const c of columns(width, sort, reverse).cols) {
    if (x - 1 >= at && x - 1 < at + c.width) return c.sort ?? null;
    at += c.width;
  }
  return null;
}

export function TensorsScreen(props: { pm: ProcessModel | undefined; width: number; height: number; sort: TensorSort; reverse: boolean; filter: string; selected: number }) {
  const { pm, width, height } = props;
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  const { cats, view, rows, catLines, names, room, first } = tensorsLayout(pm, height, props.sort, props.reverse, props.filter, props.selected);
  const { cols } = columns(width, props.sort, props.reverse);
  const lastUs = pm.model.devices[0]?.lastTime_us ?? 0;
  const line = (cell: (c: Column) => string) => cols.map((c) => pad(cell(c), c.width, c.right)).join("");
  const title = (c: Column) => (c.sort === props.sort ? `${c.title.trimEnd()}${arrow(props.reverse)}${c.title.endsWith(" ") ? " " : ""}` : c.title);
  return (
    <Box flexDirection="column">
      <Text bold>Live memory by category: {formatBytes(cats.total_bytes)} in {view.blocks.length} blocks{props.filter ? `  (filter: ${props.filter})` : ""}</Text>
      {names ? <Text dimColor>{pad(names, width - 1)}</Text> : null}
      {catLines.map((c) => (
        <Text key={c.category}>
          {pad(`  ${c.category}`, 20)}{pad(formatBytes(c.bytes), 12, true)}{pad(`${c.blocks} blocks`, 14, true)}{pad(`${Math.round(c.share * 100)}%`, 6, true)}
        </Text>
      ))}
      <Text>
        {cols.map((c, i) =>
          c.sort === props.sort ? (
            <Text key={i} bold underline color={color("cyan")}>{pad(title(c), c.width, c.right)}</Text>
          ) : (
            <Text key={i} inverse>{pad(c.title, c.width, c.right)}</Text>
          ),
        )}
      </Text>
      {rows.slice(first, first + room).map((b, i) => (
        <Text key={b.address} inverse={first + i === props.selected} dimColor={b.name === null} color={color(b.category === "activation" ? "magenta" : b.category === "parameter" ? "cyan" : "white")}>
          {line((c) => c.cell(b, lastUs - b.time_us))}
        </Text>
      ))}
    </Box>
  );
}

/** Sorts the table by `sort`; the same sort again reverses it. */
function sortBy(ui: UiState, sort: string): void {
  if (!(TENSOR_SORTS as readonly string[]).includes(sort)) return;
  if (ui.tensorSort === sort) ui.tensorReverse = !ui.tensorReverse;
  else (ui.tensorSort = sort as TensorSort), (ui.tensorReverse = false);
}

/** The Tensors screen in the frame: its table selects and sorts (s, I, a header click). */
export const tensorsScreen = {
  id: "tensors",
  key: "3",
  title: "Tensors",
  component: (p) => <TensorsScreen pm={p.pm} width={p.width} height={p.height} sort={p.ui.tensorSort} reverse={p.ui.tensorReverse} filter={p.ui.filter} selected={p.selected} />,
  rows: (p) => (p.pm && p.pm.model.devices.length ? tensorsLayout(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected).rows.length : 0),
  rowAt: (p, line) => tensorRowAt(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, line),
  sortAt: (p, line, x) => tensorSortAt(p.pm, p.width, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, line, x),
  sortBy,
  onKey: (ui, key) => {
    if (isChar(key, "s")) return sortBy(ui, cycle(TENSOR_SORTS, ui.tensorSort)), true;
    if (isChar(key, "I")) return sortBy(ui, ui.tensorSort), true;
    return false;
  },
} as const satisfies ScreenSpec;
