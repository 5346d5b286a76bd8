// Overview, nvtop-style: a panel per GPU (with history charts) and the process table, where the
// ranks of a multi-rank job (the document's jobs) sit together under the job's own row.
import { Box, Text } from "ink";
import { jobNotes } from "../../system/jobs";
import type { Device, Document, Job, Process } from "../../system/schema";
import { areaChart, bar, byteScale, GUTTER, PERCENT_SCALE, timeAxis, yAxis, type AxisScale } from "../chart";
import type { DeviceHistory } from "../../collect/session";
import { color, cut, cutWords, formatBytes, orNa, pad, pct, rate, recordedMark, textWidth } from "../format";
import { cycle, isChar, isKey, type ScreenSpec } from "../screen-spec";
import type { UiState } from "../ui-state";
import { moreSevere, rowAlert } from "../controller";
import type { FindingGroup } from "../../profiler";
import { gpuLedgerLine } from "./gpu-ledger-line";
import { headerParts, jobCells, PROCESS_SORTS, processCells, sortAtColumn, sortProcesses, tableColumns, visibleSorts, type ProcessSort } from "./process-table";

export { PROCESS_SORTS, type ProcessSort } from "./process-table";

/** A row of the process table: a job, a line of what stands out in it, or a process. */
export type OverviewRow = { kind: "job"; job: Job } | { kind: "note"; job: Job; text: string } | { kind: "process"; p: Process; job: Job | null };

/**
 * The table's rows in order: processes by the sort key, except that a job's processes come
 * together, in rank order, under the job's row, where its first process would have come. The
 * job's notes are packed into lines of at most `width` characters.
 */
export function overviewRows(doc: Document | null, sort: ProcessSort, filter: string, width = Infinity, reverse = false, oneNoteLine = false): OverviewRow[] {
  if (!doc) return [];
  const procs = sortProcesses(doc.processes, sort, filter, reverse);
  const jobOf = new Map<number, Job>();
  const rankOf = new Map<number, number>();
  for (const j of doc.jobs ?? []) for (const r of j.ranks) (jobOf.set(r.pid, j), rankOf.set(r.pid, r.rank));
  const rows: OverviewRow[] = [];
  const placed = new Set<Job>();
  for (const p of procs) {
    const job = jobOf.get(p.pid);
    if (!job) {
      rows.push({ kind: "process", p, job: null });
      continue;
    }
    if (placed.has(job)) continue;
    placed.add(job);
    rows.push({ kind: "job", job });
    // Where COMMAND is too narrow for the job's name (80 columns), the name leads its notes.
    const name = jobTitle(job);
    const named = width !== Infinity && name.length > columnsFor(doc, width).command;
    const notes = named ? [name, ...jobNotes(job)] : jobNotes(job);
    let line = "";
    for (const [k, note] of notes.entries()) {
      if (line && line.length + 2 + note.length > width - 1) (rows.push({ kind: "note", job, text: line }), (line = ""));
      line = line ? `${line}; ${note}` : `${NOTE_INDENT}${note}`;
      // A note longer than a line goes on after whole words on the next (at 80 columns the rank
      // outside PyTorch lost its cause: "(unexplained …"); the job's name stays one line, cut.
      if (named && k === 0) continue;
      for (let at = line.lastIndexOf(" ", width - 1); line.length > width - 1 && at > NOTE_INDENT.length; at = line.lastIndexOf(" ", width - 1)) {
        rows.push({ kind: "note", job, text: line.slice(0, at) });
        line = `${NOTE_INDENT}${line.slice(at + 1)}`;
      }
    }
    if (line) rows.push({ kind: "note", job, text: line });
    // Short of room, a job's notes take one line (cut): its ranks come before the rest of them.
    if (oneNoteLine) {
      const own = rows.filter((r) => r.kind === "note" && r.job === job) as Extract<OverviewRow, { kind: "note" }>[];
      if (own.length > 1) rows.splice(rows.length - own.length, own.length, { kind: "note", job, text: own.map((r, i) => (i ? r.text.trimStart() : r.text)).join("; ") });
    }
    const ranks = procs.filter((q) => jobOf.get(q.pid) === job);
    ranks.sort((a, b) => rankOf.get(a.pid)! - rankOf.get(b.pid)! || a.pid - b.pid || a.device - b.device);
    for (const q of ranks) rows.push({ kind: "process", p: q, job });
  }
  return rows;
}

/** The processes of the table in the order shown: what the selection moves over. */
export function overviewProcesses(doc: Document | null, sort: ProcessSort, filter: string, reverse = false): Process[] {
  return overviewRows(doc, sort, filter, Infinity, reverse).flatMap((r) => (r.kind === "process" ? [r.p] : []));
}

const NOTE_INDENT = "    ";

/** RANK is a column where some process has a rank or the document has jobs. */
/** The process table's columns at `width` for `doc`'s rows (process-table.ts tableColumns). */
function columnsFor(doc: Document, width: number) {
  return tableColumns(width, hasRanks(doc), new Set(doc.processes.map((p) => p.device)).size <= 1);
}

function hasRanks(doc: Document): boolean {
  return doc.processes.some((p) => p.pytorch?.rank != null) || (doc.jobs ?? []).length > 0;
}

function jobTitle(job: Job): string {
  return `${job.name}${job.launcher_pid === null ? "" : ` (launcher ${job.launcher_pid})`}`;
}

/** A GPU's name in `width`: "[recorded] " shortened to "[rec] " before the name is cut, and the name
 *  cut after a whole word ("NVIDIA H100 80GB…", never "NVIDIA H100 80…"). */
function gpuName(d: Device, width: number): string {
  const full = recordedMark(d) + d.name;
  if (textWidth(full) <= width) return full;
  const short = (d.recorded ? "[rec] " : "") + d.name;
  if (textWidth(short) <= width) return short;
  const head = cut(short, width - 2);
  const space = head.lastIndexOf(" ");
  const kept = space > 0 ? head.slice(0, space) : head;
  // After a figure ("H100") a space before "…": "H100…" reads as a number cut.
  return /\d$/.test(kept) ? `${kept} …` : `${kept}…`;
}

function DevicePanel({ d, h, width, chartRows, ascii, ledger }: { d: Device; h: DeviceHistory | undefined; width: number; chartRows: number; ascii: boolean; ledger: boolean }) {
  const total = d.memory_total_bytes ?? 0;
  const used = d.memory_used_bytes ?? 0;
  // The name gets up to 14 more columns where the terminal is wider than 110 (a "[recorded] " mark).
  const wanted = 26 + Math.max(0, Math.min(14, width - 110));
  // Below 80 columns (a tmux split) the name, then the bar, give way: the memory figures stay whole
  // on the line ("19.19 GiB/79.65 GiB" wrapped mid-figure at 72 columns).
  const fixed = `GPU ${d.index}  GPU ${pct(d.gpu_utilization_percent).padStart(4)}  MEM  ${formatBytes(used)}/${formatBytes(total)}`.length;
  let barWidth = Math.max(10, Math.min(40, width - 70 - (wanted - 26)));
  if (width - 1 - fixed - barWidth < 12) barWidth = Math.max(4, width - 1 - fixed - 12);
  const nameWidth = Math.max(4, Math.min(wanted, width - 1 - fixed - barWidth));
  const power = d.power_draw_milliwatts === null ? "n/a" : `${Math.round(d.power_draw_milliwatts / 1000)}/${d.power_limit_milliwatts === null ? "?" : Math.round(d.power_limit_milliwatts / 1000)} W`;
  // Two charts side by side, each with its y axis (GUTTER) and a time axis under it.
  const half = Math.max(GUTTER + 10, Math.floor((width - 3) / 2));
  const cells = half - GUTTER;
  // Each chart drawn to its scale's round top (80 GiB of a 79.6 GiB GPU), so its ticks are true.
  const axis = (lines: string[], scale: AxisScale) => yAxis(lines.length, scale, ascii).map((g, i) => g + lines[i]);
  const memScale = byteScale(total || 1);
  const util = h ? axis(areaChart(h.util, { width: cells, height: chartRows, max: PERCENT_SCALE.top, ascii }), PERCENT_SCALE) : [];
  const mem = h ? axis(areaChart(h.memUsed, { width: cells, height: chartRows, max: memScale.top, ascii }), memScale) : [];
  const time = h ? timeAxis(cells, chartSpanMs(h, ascii ? cells : cells * 2) * 1000, "now") : "";
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold color={color("cyan")}>GPU {d.index}</Text> {pad(gpuName(d, nameWidth), nameWidth)} GPU <Text bold>{pad(pct(d.gpu_utilization_percent), 4, true)}</Text>  MEM{" "}
        <Text color={color(used / (total || 1) > 0.9 ? "red" : "green")}>{bar(used / (total || 1), barWidth, ascii)}</Text> {formatBytes(used)}/{formatBytes(total)}
      </Text>
      {/* Cut after a whole figure where the line ends (cutWords), never inside one. */}
      <Text dimColor>
        {cutWords(`      ${orNa(d.temperature_celsius, "°C")}  ${power}  SM ${orNa(d.sm_clock_mhz)}/${orNa(d.sm_clock_max_mhz)} MHz  MEM ${orNa(d.memory_clock_mhz)} MHz  PCIe rx ${rate(d.pcie_rx_bytes_per_second)} tx ${rate(d.pcie_tx_bytes_per_second)}  fan ${pct(d.fan_speed_percent)}  ${d.performance_state === null ? "" : `P${d.performance_state}`}`.trimEnd(), width - 1)}
      </Text>
      {ledger ? <LedgerLine d={d} width={width} /> : null}
      {chartRows > 0 && h ? (
        <Box>
          <Box flexDirection="column" marginRight={1}>
            <Text dimColor>{pad(`${" ".repeat(GUTTER)}GPU utilization (%)`, half)}</Text>
            {/* A text a row: Ink keeps the rows that did not change (one multi-line text is laid out
                again whole where any of its rows changed, and costs more at a second's interval). */}
            {util.map((l, i) => (
              <Text key={i} color={color("cyan")}>{l}</Text>
            ))}
            <Text dimColor>{time}</Text>
          </Box>
          <Box flexDirection="column">
            <Text dimColor>{pad(cutWords(`${" ".repeat(GUTTER)}GPU memory used, of ${formatBytes(total)}`, half), half)}</Text>
            {mem.map((l, i) => (
              <Text key={i} color={color("green")}>{l}</Text>
            ))}
            <Text dimColor>{time}</Text>
          </Box>
        </Box>
      ) : null}
    </Box>
  );
}

/** The GPU's memory, what it is made of (gpu-ledger-line.ts): yellow where a gone pid holds some. */
function LedgerLine({ d, width }: { d: Device; width: number }) {
  const l = gpuLedgerLine(d, width - 1);
  if (!l) return null;
  return l.gone ? <Text color={color("yellow")}>{l.text}</Text> : <Text dimColor>{l.text}</Text>;
}

/** How long ago the chart's left edge lies (ms): its samples' span, or, while they fill only its
 *  right part, as many sample periods as the chart has points. */
export function chartSpanMs(h: DeviceHistory, points: number): number {
  const t = h.timesMs ?? [];
  if (t.length < 2) return 0;
  const span = t.at(-1)! - t[0]!;
  return t.length >= points ? span : (span / (t.length - 1)) * points;
}

/**
 * Where things sit on the Overview: chart rows per GPU, the table's header line (from the top of
 * the screen), its rows, the selected row and the first row shown. The screen draws from it and a
 * click is read back through it.
 */
export function overviewLayout(doc: Document, history: Map<number, DeviceHistory>, width: number, height: number, selected: number, sort: ProcessSort, reverse: boolean, filter: string) {
  const devices = doc.devices;
  // Height budget: the table's rows first (every rank of a job: its notes cut to one line where
  // they would push ranks out), then charts with what is left (each with a title and a time axis),
  // at least three rows tall or none.
  const cols = columnsFor(doc, width);
  const panels = devices.length * 2;
  let rows = overviewRows(doc, sort, filter, width, reverse);
  // Each GPU's ledger line (what its memory is made of) where the table keeps its rows beside
  // those lines, up to ten of them (a job's notes uncut): four GPUs on 24 lines with a job show
  // none (the status line still says a gone pid's memory: held-memory).
  const ledgered = devices.filter((d) => d.ledger).length;
  const ledger = ledgered > 0 && height - panels - 1 - ledgered >= Math.max(3, Math.min(rows.length, 10));
  const room = height - panels - (ledger ? ledgered : 0) - 1;
  if (rows.length > room) rows = overviewRows(doc, sort, filter, width, reverse, true);
  const charted = devices.filter((d) => history.has(d.index)).length;
  const spare = room - Math.max(3, rows.length);
  const perDevice = charted ? Math.floor(spare / charted) - 2 : 0;
  // Free rows go to the charts, up to half the screen (the table keeps room for processes to come).
  const chartRows = perDevice >= 3 ? Math.min(Math.max(MAX_CHART_ROWS, Math.floor(height / 2)), perDevice) : 0;
  const deviceLines = devices.reduce((n, d) => n + 2 + (ledger && d.ledger ? 1 : 0) + (chartRows && history.has(d.index) ? chartRows + 2 : 0), 0);
  const tableRows = Math.max(3, height - deviceLines - 1);
  // The selection counts processes only; the window scrolls over every row.
  const procRows = rows.flatMap((r, i) => (r.kind === "process" ? [i] : []));
  const selRow = procRows[selected] ?? -1;
  const target = selRow >= 0 ? selRow : selected >= procRows.length ? rows.length : 0;
  const first = Math.max(0, Math.min(target - tableRows + 1, rows.length - tableRows));
  return { chartRows, ledger, cols, rows, procRows, selRow, first, tableRows, headerLine: devices.length === 0 ? 1 : deviceLines };
}

/** The tallest a GPU chart grows on a tall terminal. */
const MAX_CHART_ROWS = 12;

/** The process (its index in the selection) under line `line` of the screen, or null. */
export function overviewRowAt(doc: Document | null, history: Map<number, DeviceHistory>, width: number, height: number, selected: number, sort: ProcessSort, reverse: boolean, filter: string, line: number): number | null {
  if (!doc) return null;
  const l = overviewLayout(doc, history, width, height, selected, sort, reverse, filter);
  const k = line - l.headerLine - 1;
  if (k < 0 || k >= l.tableRows) return null;
  const i = l.procRows.indexOf(l.first + k);
  return i >= 0 ? i : null;
}

export function Overview(props: {
  doc: Document | null;
  history: Map<number, DeviceHistory>;
  width: number;
  height: number;
  selected: number;
  sort: ProcessSort;
  reverse: boolean;
  filter: string;
  ascii: boolean;
  /** What a replay running beside the machine's processes is (a demo, a file), or null. */
  replay: string | null;
  /** False where the monitor samples no machine (replay FILE, view FILE). */
  sampling: boolean;
  /** Where a replay shows: "2 Process, 3 Tensors and 4 Segments", and where it plays: "2 Process". */
  replayHint: string;
  replayAt: string;
  /** The finding that marks a process's row (the store's: ScreenState.alerts), or null. */
  alertOf?: (p: Process) => FindingGroup | null;
}) {
  const { doc, width, height } = props;
  if (!doc) return <Text>{props.sampling || !props.replay ? "sampling…" : `${props.replay}: this mode samples no GPUs; ${props.replayHint} show it.`}</Text>;
  const devices = doc.devices;
  const { chartRows, ledger, cols, rows, selRow, first, tableRows } = overviewLayout(doc, props.history, width, height, props.selected, props.sort, props.reverse, props.filter);
  const title = `COMMAND  (sort: ${props.sort}${props.reverse ? ", reversed" : ""}${props.filter ? `, filter: ${props.filter}` : ""})`;
  const users = new Map<Job, Set<string>>();
  for (const r of rows) if (r.kind === "process" && r.job && r.p.user) (users.get(r.job) ?? users.set(r.job, new Set()).get(r.job)!).add(r.p.user);
  // A job's row is marked as its most severe rank.
  const alertOf = props.alertOf ?? (() => null);
  const jobAlert = new Map<Job, FindingGroup | null>();
  for (const r of rows) if (r.kind === "process" && r.job) jobAlert.set(r.job, moreSevere(jobAlert.get(r.job), alertOf(r.p)));
  return (
    <Box flexDirection="column">
      {devices.length === 0 ? (
        <Text color={color("yellow")}>
          No GPU here: {doc.reason ?? "NVML reports no devices"}.{" "}
          {props.replay ? `${props.replay} plays on ${props.replayAt}.` : "Press D for a replay of a real training run recorded on an H100."}
        </Text>
      ) : (
        devices.map((d) => <DevicePanel key={d.index} d={d} h={props.history.get(d.index)} width={width} chartRows={chartRows} ascii={props.ascii} ledger={ledger} />)
      )}
      <Text bold wrap="truncate-end">
        {headerParts(cols, title, props.sort, props.reverse, props.ascii).map((p, i) =>
          p.sort !== undefined && p.sort === props.sort ? (
            <Text key={i} underline color={color("cyan")}>{p.text}</Text>
          ) : (
            <Text key={i} inverse>{p.text}</Text>
          ),
        )}
      </Text>
      {rows.length === 0 ? <Text dimColor>{props.filter && doc.processes.length ? `no process matches the filter "${props.filter}"` : "no GPU processes"}</Text> : null}
      {rows.slice(first, first + tableRows).map((r, i) => {
        if (r.kind === "job") {
          return (
            <Text key={`job-${r.job.id}`} bold color={color(alertColor(jobAlert.get(r.job)) ?? "cyan")} wrap="truncate-end">
              {jobCells(cols, r.job, users.get(r.job) ?? new Set(), `${alertMark(jobAlert.get(r.job))}${jobTitle(r.job)}`)}
            </Text>
          );
        }
        if (r.kind === "note") {
          const trouble = r.job.missing_ranks.length > 0 || r.job.ranks.some((x) => x.exited);
          return (
            <Text key={`note-${r.job.id}-${first + i}`} color={color(trouble ? "yellow" : "gray")} wrap="truncate-end">
              {pad(r.text, width - 1)}
            </Text>
          );
        }
        const p = r.p;
        const alert = alertOf(p);
        return (
          <Text key={`${p.pid}-${p.device}`} inverse={first + i === selRow} color={color(alertColor(alert) ?? (p.pytorch ? "white" : "gray"))} wrap="truncate-end">
            {processCells(cols, p, r.job !== null, alertMark(alert))}
          </Text>
        );
      })}
    </Box>
  );
}

/** A row's colour for its finding: red for an error, yellow for a warning; null: the row's own. */
function alertColor(f: FindingGroup | null | undefined): string | null {
  return f ? (f.severity === "error" ? "red" : "yellow") : null;
}

/** The mark that leads a marked row's COMMAND (its finding's title is on the status line). */
const alertMark = (f: FindingGroup | null | undefined) => (f ? "! " : "");

/** What F3 searches in a process's row: what the filter reads. */
const rowText = (p: Process) => `${p.pid} ${p.user ?? ""} ${p.name ?? ""} ${p.command ?? ""}`;

/** Sorts the process table by `sort`; the same sort again reverses it. */
function sortBy(ui: UiState, sort: string): void {
  if (!(PROCESS_SORTS as readonly string[]).includes(sort)) return;
  if (ui.procSort === sort) ui.procReverse = !ui.procReverse;
  else (ui.procSort = sort as ProcessSort), (ui.procReverse = false);
}

/** The Overview in the frame: its process table selects, sorts by its columns (s, I, a header
 *  click), and Enter opens the selected process on the Process screen. */
export const overviewScreen = {
  id: "overview",
  key: "1",
  title: "Overview",
  component: (p) => (
    <Overview doc={p.state.doc} history={p.state.history} width={p.width} height={p.height} selected={p.selected} sort={p.ui.procSort} reverse={p.ui.procReverse} filter={p.ui.filter} ascii={p.ascii}
      replay={p.ctl.replay ? `The ${p.ctl.replay.title}` : null} sampling={p.ctl.session !== null} replayHint={p.keyHint(["process", "tensors", "segments", "timeline"])} replayAt={p.keyHint(["process"])}
      alertOf={(proc) => rowAlert(p.state, proc)} />
  ),
  rows: (p) => overviewProcesses(p.state.doc, p.ui.procSort, p.ui.filter, p.ui.procReverse).length,
  rowTexts: (p) => overviewProcesses(p.state.doc, p.ui.procSort, p.ui.filter, p.ui.procReverse).map(rowText),
  rowAt: (p, line) => overviewRowAt(p.state.doc, p.state.history, p.width, p.height, p.selected, p.ui.procSort, p.ui.procReverse, p.ui.filter, line),
  sortAt: (p, line, x) => {
    const { doc, history } = p.state;
    if (!doc) return null;
    const l = overviewLayout(doc, history, p.width, p.height, p.selected, p.ui.procSort, p.ui.procReverse, p.ui.filter);
    return line === l.headerLine ? sortAtColumn(l.cols, x) : null;
  },
  sortBy,
  sorts: (p) => (p.state.doc ? visibleSorts(columnsFor(p.state.doc, p.width)) : []),
  onKey: (ui, key, ctx) => {
    if (isChar(key, "s")) return sortBy(ui, cycle(ctx.sorts(ui), ui.procSort)), true;
    if (isChar(key, "I")) return sortBy(ui, ui.procSort), true;
    if (!isKey(key, "return")) return false;
    const p = ctx.procs(ui)[ui.selected[ui.screen]!];
    const pid = p ? (p.agent_pid ?? p.pid) : ui.pid;
    // Another process: its segments are not the one opened.
    if (pid !== ui.pid) ui.segment = null;
    ui.pid = pid;
    ctx.show(ui, "process");
    return true;
  },
} as const satisfies ScreenSpec;
