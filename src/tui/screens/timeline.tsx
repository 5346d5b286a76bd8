// Timeline: one training step through time, as memory_viz's Active Memory Timeline draws it, in the
// terminal: the largest blocks as bands from their allocation to their free (or to the step's end),
// what was held from earlier steps as one band, the other blocks summed, allocated over the step,
// and beneath them the phase and the record_function range of each column. ↑↓ select a row, Enter
// says what is known of it, ← → go to an earlier or a later step (profiler/step-bands.ts).
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { PHASE_NAMES } from "../../ffi/events";
import { stepBands, steps, timelineSteps, type StepBand, type StepBands } from "../../profiler";
import { phaseStrip } from "../chart";
import { phaseShares } from "../../profiler/phase-shares";
import { color, cutWords, formatBytes, formatBytesShort, inPhase, pad, phaseLabel, textWidth, UNKNOWN } from "../format";
import { isKey, type ScreenProps, type ScreenSpec } from "../screen-spec";
import type { UiState } from "../ui-state";
import { formatShape } from "./tensor-table";
import { bandCells, formatSpan, rangeRuns, sparkRow, stepAxis } from "./timeline-rows";
import { whose } from "../snapshot-header";

// Phase colors as the Process chart's band: other, forward, backward, optimizer.
const PHASE_COLORS = ["gray", "cyan", "magenta", "yellow"] as const;
const SIZE_WIDTH = 9;
/** Lines besides the bands: title, keys, column titles, held, rest, allocated, phase, range, axis, legend. */
const FIXED_LINES = 10;

type Choice = number | "running" | null;

interface Layout {
  pm: ProcessModel;
  sb: StepBands;
  /** Steps the kept records reach (oldest first), the running one last. */
  order: Choice[];
  at: number;
  label: number;
  bar: number;
  /** The first row's line (below the title, the keys, the notes and the column titles). */
  top: number;
  /** The step's peak as the model recorded it (peakOf). */
  peak: { bytes: number; phase: string | null };
}

const labelWidth = (width: number) => Math.max(18, Math.min(48, Math.floor(width * 0.32)));

/** A band's name on its row: the agent's, else its category and its range (its phase where it
 *  was in none); its color tells the phase, the title the step, the detail all of it. */
function rowLabel(b: StepBand): string {
  if (b.name) return b.name;
  if (b.phase === null) {
    const freed = b.freed_range_name ? `in ${b.freed_range_name}` : b.freed_phase === "other" ? "outside the phases" : `in ${b.freed_phase}`;
    return `${b.label.includes("kept records") ? "before the records" : "earlier step"}, freed ${freed}`;
  }
  // The line that allocated it says more than its range, where it is known: the file's name and line.
  return `${b.category ?? "block"} · ${b.line ? shortLine(b.line) : (b.range_name ?? phaseLabel(b.phase))}`;
}

/** "train.py:42 step" of "path/train.py:42 step". */
const shortLine = (line: string) => line.replace(/^.*\//, "");

// The last layout, reused while nothing changed (the keys ask for it as often as the frame does),
// and the size it was made for: Enter acts on the rows as the screen draws them at that size.
let memo: { key: string; model: object; layout: Layout | string; width: number; height: number } | null = null;

/** What the screen shows for `pm` at this size: its step's bands, or why there are none. */
function layoutOf(pm: ProcessModel | undefined, ui: UiState, width: number, height: number): Layout | string {
  if (!pm) return "No PyTorch process with the agent selected: select one on the Overview, or press D for a replay.";
  const m = pm.model;
  const d = m.devices[0];
  // A past step the screens show (`[` `]`, or ← → here) is this screen's step too.
  const choice: Choice = ui.when ?? ui.timeline?.step ?? null;
  const key = `${pm.pid}|${m.eventsIngested}|${m.tail?.total}|${d?.version}|${width}|${height}|${choice}`;
  if (memo && memo.model === m && memo.key === key) return memo.layout;
  const layout = compute(pm, choice, width, height);
  memo = { key, model: m, layout, width, height };
  return layout;
}

function compute(pm: ProcessModel, choice: Choice, width: number, height: number): Layout | string {
  const m = pm.model;
  if (!m.tail) return `${whose(pm)}: the timeline is drawn from the records the monitor keeps, and this process's model keeps none.`;
  const d = m.devices[0];
  const steps = d ? timelineSteps(m, d.device) : null;
  if (!d || !steps) return `${whose(pm)}: no allocator events yet (${pm.title}).`;
  const order: Choice[] = [...steps.steps, "running"];
  const step = choice === "running" ? steps.running : choice === null ? (steps.steps.at(-1) ?? steps.running) : steps.steps.includes(choice) ? choice : (steps.steps[0] ?? steps.running);
  const at = step === steps.running ? order.length - 1 : order.indexOf(step);
  const label = labelWidth(width);
  const bar = Math.max(10, width - 1 - label - 1 - SIZE_WIDTH - 1);
  // Notes (a partial step) take their lines first; the bands get what is left (one at least).
  const room = (notes: number) => Math.max(1, height - FIXED_LINES - notes);
  let sb = stepBands(m, { device: d.device, step, columns: bar, bands: room(0) })!;
  if (sb.notes.length > 0) sb = stepBands(m, { device: d.device, step, columns: bar, bands: room(sb.notes.length) })!;
  return { pm, sb, order, at, label, bar, top: 3 + sb.notes.length, peak: peakOf(pm, sb) };
}

/** The rows ↑↓ move over: the held band, the bands, the rest. */
const rowCount = (l: Layout) => l.sb.bands.length + 2;

/** The band a row shows (null: the held band or the rest). */
const bandOfRow = (l: Layout, row: number): StepBand | null => (row >= 1 && row <= l.sb.bands.length ? l.sb.bands[row - 1]! : null);

const phaseCode = (p: string | null) => (p === null ? -1 : PHASE_NAMES.indexOf(p as (typeof PHASE_NAMES)[number]));
const since = (sb: StepBands, us: number) => `+${formatSpan(Math.max(0, us - sb.start_us))}`;

function Row({ l, label, size, cells, tone, selected }: { l: Layout; label: string; size: string; cells: string; tone: string; selected: boolean }) {
  return (
    <Text>
      <Text inverse={selected}>{pad(label, l.label)}</Text> {pad(size, SIZE_WIDTH, true)} <Text color={color(tone)}>{cells}</Text>
    </Text>
  );
}

/** The rows of the bands' list (the opened row only, in the detail). */
function rows(l: Layout, selected: number, ascii: boolean, only: number | null) {
  const { sb } = l;
  const out = [];
  const show = (r: number) => only === null || only === r;
  if (show(0)) {
    const cells = sb.held.bytes > 0 ? bandCells({ from_us: sb.from_us, to_us: sb.end_us }, sb.start_us, sb.column_us, sb.columns, ascii) : "";
    out.push(<Row key="held" l={l} label={sb.held.label} size={formatBytesShort(sb.held.bytes)} cells={cells} tone="blue" selected={selected === 0} />);
  }
  sb.bands.forEach((b, i) => {
    if (!show(i + 1)) return;
    const tone = b.phase === null ? "white" : PHASE_COLORS[phaseCode(b.phase)] ?? "white";
    out.push(<Row key={`${b.address}:${b.from_us}`} l={l} label={rowLabel(b)} size={formatBytesShort(b.size_bytes)} cells={bandCells(b, sb.start_us, sb.column_us, sb.columns, ascii)} tone={tone} selected={selected === i + 1} />);
  });
  const r = sb.bands.length + 1;
  if (show(r)) {
    const most = Math.max(0, ...sb.rest_bytes.map((v) => v ?? 0));
    out.push(<Row key="rest" l={l} label={`${sb.rest_blocks} other blocks, summed`} size={formatBytesShort(most)} cells={sparkRow(sb.rest_bytes, most, ascii)} tone="white" selected={selected === r} />);
  }
  return out;
}

/** Beneath the rows: allocated, the phase and range strips, the time axis. */
function Beneath({ l, ascii, legend, width }: { l: Layout; ascii: boolean; legend: boolean; width: number }) {
  const { sb } = l;
  const gutter = l.label + 1 + SIZE_WIDTH + 1;
  // The phase strip by the Process chart's rule (profiler/phase-shares.ts, chart.ts phaseStrip): a
  // column takes a phase's letter where that phase held nearly all of its time, else it is drawn as
  // mixed; never the phase with the most records (a step's frees made columns read as backward).
  const strip = phaseStrip(phaseShares(l.pm.model, sb.device, sb.start_us, sb.start_us + sb.columns * sb.column_us, sb.columns), sb.column_us, ascii);
  // Allocated from its least in the step to its peak: what was held all along would flatten it.
  const least = Math.min(...sb.allocated_bytes.filter((v): v is number => v !== null), sb.peak_bytes);
  // Its label whole (never "allocated, from 1.…"): shorter words where the label's column is narrow.
  const from = formatBytesShort(least);
  const allocatedLabel = [`allocated, from ${from}`, `alloc from ${from}`, `from ${from}`].find((t) => t.length <= l.label) ?? `from ${from}`;
  return (
    <>
      <Text>
        {pad(allocatedLabel, l.label)} {pad(formatBytesShort(sb.peak_bytes), SIZE_WIDTH, true)} <Text color={color("green")}>{sparkRow(sb.allocated_max_bytes, sb.peak_bytes, ascii, least)}</Text>
      </Text>
      <Text wrap="truncate-end">
        <Text dimColor>{pad("phase", gutter - 1, true)} </Text>
        {strip.runs.map((r, i) => (
          <Text key={i} color={color(PHASE_COLORS[r.phase] ?? "gray")}>{r.text}</Text>
        ))}
      </Text>
      <Text wrap="truncate-end">
        <Text dimColor>{pad("range", gutter - 1, true)} </Text>
        {rangeRuns(sb.range, ascii).map((r, i) => (
          <Text key={i} color={color(i % 2 ? "white" : "cyan")}>{r.text}</Text>
        ))}
      </Text>
      <Text dimColor>{" ".repeat(gutter)}{stepAxis(sb.columns, sb.end_us - sb.start_us)}</Text>
      {legend ? <Text dimColor>{cutWords(`phase: ${strip.legend}; a band has the color of the phase that allocated it`, width - 1)}</Text> : null}
    </>
  );
}

/** A step's peak as the model recorded it at the peak's record (steps()): the one peak every
 *  screen tells, and its phase, not that of the chart's column it falls in (a column holds many
 *  records and takes the most frequent one's phase: the phase told changed with the width). */
function peakOf(pm: ProcessModel, sb: StepBands): { bytes: number; phase: string | null } {
  const line = steps(pm.model, { device: sb.device }).steps.find((s) => s.step === sb.step);
  return line ? { bytes: line.peak_allocated_bytes, phase: line.peak_phase } : { bytes: sb.peak_bytes, phase: null };
}

/** The step and its peak, with its phase (the answer) kept whole: where the line is too narrow,
 *  whose step it is goes first (the header names the process), then the time into the step. */
function title(l: Layout, width: number): string {
  const { sb, pm } = l;
  const where = l.peak.phase ? ` ${inPhase(l.peak.phase)}` : "";
  const step = `step ${sb.step}${sb.running ? " (running)" : ""}: ${formatSpan(sb.end_us - sb.start_us)}, peak ${formatBytes(l.peak.bytes)}`;
  const tries = [`${whose(pm)}  ${step} at ${since(sb, sb.peak_us)}${where}`, `${step} at ${since(sb, sb.peak_us)}${where}`, `${step}${where}`];
  return cutWords(tries.find((t) => textWidth(t) <= width) ?? tries.at(-1)!, width);
}

function header(l: Layout, ascii: boolean) {
  const key = ascii ? "ALIVE (# all of a column, [ from, ] to)" : "ALIVE (█ all of a column, ▐ from, ▌ to)";
  return `${pad("BLOCK (bytes × time)", l.label)} ${pad("SIZE", SIZE_WIDTH, true)} ${pad(key, l.bar)}`;
}

/** What is known of the opened row, in lines. */
function detail(l: Layout, open: NonNullable<NonNullable<UiState["timeline"]>["open"]>): string[] {
  const { sb } = l;
  if (open.row === "held") {
    const h = sb.held;
    const gone = h.bytes - h.alive_now_bytes;
    return [
      `${h.label}: ${formatBytes(h.bytes)}, allocated before ${sb.partial ? "the kept records begin" : `step ${sb.step}`} and alive through it`,
      `${h.alive_now_blocks} of these blocks are still alive now (${formatBytes(h.alive_now_bytes)})${gone > 0 ? `; ${formatBytes(gone)} of it was freed after the step` : ""}; the largest:`,
      ...h.largest.map((b) => `  ${pad(b.label, Math.max(20, l.label + 16))} ${pad(formatBytes(b.size_bytes), 11, true)}  ${b.category}`),
    ];
  }
  if (open.row === "rest") {
    const most = Math.max(0, ...sb.rest_bytes.map((v) => v ?? 0));
    return [`${sb.rest_blocks} other blocks, each smaller in bytes × time alive than the ${sb.bands.length} bands above: at most ${formatBytes(most)} of them alive at once at a column's end.`];
  }
  const b = sb.bands.find((x) => x.address === open.address && x.from_us === open.from_us);
  if (!b) return [`That block is not among the bands of step ${sb.step} now.`];
  const range = (r: string | null) => (r ? `, in ${r}` : "");
  const allocated = b.alloc_us === null ? `before ${sb.partial ? "the kept records begin" : `step ${sb.step}`}` : `at ${since(sb, b.alloc_us)} ${inPhase(b.phase!)} of step ${b.step}${range(b.range_name)}`;
  const freed =
    b.free_us !== null
      ? `at ${since(sb, b.free_us)} ${inPhase(b.freed_phase!)}${range(b.freed_range_name)}`
      : b.alive_now
        ? `not in this step: still alive now`
        : sb.running
          ? "not yet"
          : "after this step";
  const shape = b.shape ? `  ${formatShape(b.shape)} ${b.dtype ?? ""}` : "";
  return [
    `size       ${formatBytes(b.size_bytes)} (${b.size_bytes.toLocaleString("en-US")} bytes)`,
    `name       ${b.name ?? "not named by the agent"}${shape}`,
    ...(b.name ? [] : [`known as   ${b.label}`]),
    ...(b.line ? [`line       ${b.line}`] : []),
    `category   ${b.category ?? UNKNOWN}${b.category === null ? "" : b.alive_now ? " (the model's, the block is alive)" : " (by its lifetime)"}`,
    `phase      ${b.phase === null ? UNKNOWN : phaseLabel(b.phase)}    range ${b.range_name ?? UNKNOWN}    step ${b.step ?? UNKNOWN}`,
    `allocated  ${allocated}`,
    `freed      ${freed}`,
    `alive      ${formatSpan(b.to_us - b.from_us)} of the step's ${formatSpan(sb.end_us - sb.start_us)}`,
    `address    0x${b.address.toString(16)}${b.stream === null ? "" : `    stream ${b.stream}`}`,
  ];
}

export function TimelineScreen({ pm, ui, width, height, ascii, selected }: { pm: ProcessModel | undefined; ui: UiState; width: number; height: number; ascii: boolean; selected: number }) {
  const l = layoutOf(pm, ui, width, height);
  if (typeof l === "string") return <Text dimColor>{l}</Text>;
  const { sb } = l;
  const open = ui.timeline?.open ?? null;
  const first = l.order[0] === "running" ? sb.step : l.order[0];
  // The steps kept as a range ("0-40": "0…40" read as a figure cut), in fewer words where narrow.
  const kept = `${first}-${l.pm.model.devices[0]?.cur.step} kept`;
  const keys = [`↑↓ a row  Enter what is known of it  ${l.order.length > 1 ? `← → an earlier / later step (${kept})` : ""}`, `↑↓ a row  Enter: what is known  ${l.order.length > 1 ? `← → step (${kept})` : ""}`];
  // The opened row alone above the detail (−1: a band no longer among them, none).
  const openRow = open === null ? null : open.row === "held" ? 0 : open.row === "rest" ? sb.bands.length + 1 : sb.bands.findIndex((b) => b.address === open.address && b.from_us === open.from_us) + 1 || -1;
  const lines = open ? detail(l, open) : [];
  return (
    <Box flexDirection="column">
      <Text bold>{title(l, width - 1)}</Text>
      <Text dimColor>{open ? "Esc: back to the bands" : cutWords(keys.find((k) => k.trimEnd().length <= width - 1) ?? keys[1]!, width - 1)}</Text>
      {sb.notes.map((n) => (
        <Text key={n} color={color("yellow")} wrap="truncate-end">Partial: {n}</Text>
      ))}
      <Text inverse>{header(l, ascii)}</Text>
      {rows(l, open ? -1 : selected, ascii, openRow)}
      <Beneath l={l} ascii={ascii} legend={!open} width={width} />
      {lines.slice(0, Math.max(1, height - 8 - sb.notes.length)).map((t, i) => (
        <Text key={i} wrap="truncate-end">{t}</Text>
      ))}
    </Box>
  );
}

/** Moves the step shown by `by` (−1 earlier, +1 later) among those kept. */
function moveStep(ui: UiState, l: Layout, by: number): void {
  const to = l.at + by;
  if (to < 0 || to >= l.order.length) return;
  const next = l.order[to]!;
  // The last complete step is "the latest" (null): it moves on with the run. Another complete step
  // is the past every screen shows (ui.when).
  const latest = l.order.length >= 2 ? l.order[l.order.length - 2] : undefined;
  ui.timeline = { step: next === latest || typeof next === "number" ? null : next, open: null };
  ui.when = typeof next === "number" && next !== latest ? next : null;
}

/** Opens row `row` of the layout last drawn. */
function openRow(ui: UiState, l: Layout, row: number): void {
  const b = bandOfRow(l, row);
  const back = ui.timeline?.step ?? null;
  // The opened step stays put while the detail shows (a live run moves on meanwhile).
  const step = l.sb.running ? "running" : l.sb.step;
  ui.timeline = { step, open: { row: b ? "band" : row === 0 ? "held" : "rest", address: b?.address ?? 0, from_us: b?.from_us ?? 0, back } };
}

/** The layout as the screen draws it now, at the size it was last drawn (keys come between frames:
 *  a key before this one may have changed the step). */
function drawn(pm: ProcessModel | undefined, ui: UiState): Layout | null {
  if (!pm || !memo || memo.model !== pm.model) return null;
  const l = layoutOf(pm, ui, memo.width, memo.height);
  return typeof l === "string" ? null : l;
}

const propsLayout = (p: ScreenProps) => layoutOf(p.pm, p.ui, p.width, p.height);

export const timelineScreen = {
  id: "timeline",
  key: "8",
  title: "Timeline",
  component: (p) => <TimelineScreen pm={p.pm} ui={p.ui} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} />,
  rows: (p) => {
    const l = propsLayout(p);
    return typeof l === "string" || p.ui.timeline?.open ? 0 : rowCount(l);
  },
  rowAt: (p, line) => {
    const l = propsLayout(p);
    if (typeof l === "string" || p.ui.timeline?.open) return null;
    const k = line - l.top;
    return k >= 0 && k < rowCount(l) ? k : null;
  },
  onKey: (ui, key, ctx) => {
    const open = ui.timeline?.open ?? null;
    if (isKey(key, "escape") || isKey(key, "backspace")) {
      if (!open) return false;
      ui.timeline = { step: open.back, open: null };
      return true;
    }
    const isReturn = isKey(key, "return");
    const isLeft = isKey(key, "left");
    if (!isReturn && !isLeft && !isKey(key, "right")) return false;
    const l = drawn(ctx.pm(ui), ui);
    if (open || !l) return true;
    if (isReturn) openRow(ui, l, ui.selected[ui.screen]!);
    else moveStep(ui, l, isLeft ? -1 : 1);
    return true;
  },
  // A click on the selected row opens it, as Enter does.
  onClickSelected: (ui, row) => {
    const l = memo && typeof memo.layout !== "string" ? drawn(memo.layout.pm, ui) : null;
    if (!l || ui.timeline?.open) return false;
    openRow(ui, l, row);
    return true;
  },
} as const satisfies ScreenSpec;
