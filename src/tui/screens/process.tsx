// Process: a PyTorch process's allocator over time, its headline numbers, what is wrong in words,
// and where the last step's memory went, by phase and by record_function range.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { breakdown, distinctFindings, findings, oomColumns, poolsLine, summary, timeline, unallocatedLine, unallocatedView, type FindingGroup, type PhaseBreakdown, type StepBreakdown } from "../../profiler";
import { areaChart, byteScale, GUTTER, markLine, onTimeAxis, phaseStrip, timeAxis, yAxis } from "../chart";
import { phaseShares } from "../../profiler/phase-shares";
import { color, cutMiddle, cutWords, flow, formatBytes, inPhase, pad, phaseLabel, textWidth, UNKNOWN } from "../format";
import { clausePieces, Flow, flowLines, type Piece } from "./flow";
import { isKey, type ScreenProps, type ScreenSpec } from "../screen-spec";
import { counted, UNALLOCATED } from "../../words";
import { recordingAxis } from "../snapshot-header";
import { outsideLedger, outsideWords } from "./outside-line";
import type { Ledger } from "../../system/ledger-rows";
import { growthPerStep, rowForecastRoom } from "../../system/document";
import { forecastAt, forecastBasis, oomWords, type Forecast } from "../../profiler/forecast";

/** The fewest rows a chart is drawn with: fewer read as a line, not a shape. */
const MIN_CHART_ROWS = 4;

// Phase band colors: other, forward, backward, optimizer (letters carry them without color).
const PHASE_COLORS = ["gray", "cyan", "magenta", "yellow"] as const;

/** The step table's columns: what each is (its title) and, under it, what it adds up, so that a
 *  phase's own bytes (ALLOCATED … SHARE) are not read against PEAK, which counts all memory in use.
 *  Widths fill 79 columns (an 80-column terminal). */
const STEP_COLUMNS: { key: string; width: number; title: string; sums: string; cell?: (p: PhaseBreakdown) => string }[] = [
  { key: "phase", width: 10, title: "PHASE", sums: "" },
  { key: "allocated", width: 13, title: "ALLOCATED", sums: "sum in phase", cell: (p) => formatBytes(p.alloc_bytes) },
  { key: "temporary", width: 14, title: "TEMPORARY", sums: "of it, freed", cell: (p) => formatBytes(p.temporary_bytes) },
  { key: "held", width: 13, title: "HELD AT END", sums: "of it, kept", cell: (p) => formatBytes(p.held_at_end_bytes) },
  { key: "peak", width: 14, title: "PEAK", sums: "most in use", cell: (p) => (p.peak_allocated_bytes === null ? UNKNOWN : formatBytes(p.peak_allocated_bytes)) },
  { key: "share", width: 15, title: "SHARE OF PEAK", sums: "of it at peak", cell: (p) => `${Math.round(p.share_of_step_peak * 100)}%` },
];

/** The step table's columns that fit `width`: below 80 columns TEMPORARY, then SHARE OF PEAK, then
 *  ALLOCATED give way (a row wrapped at 60 columns, its PEAK cut); PHASE, HELD AT END and PEAK stay. */
export function stepColumns(width: number): typeof STEP_COLUMNS {
  let cols = STEP_COLUMNS;
  for (const key of ["temporary", "share", "allocated"]) {
    if (cols.reduce((n, c) => n + c.width, 0) <= width) break;
    cols = cols.filter((c) => c.key !== key);
  }
  return cols;
}

/** The step table's two header lines: the columns' titles, then what each sums (the first cell: the step). */
const STEP_HEADER: ((c: (typeof STEP_COLUMNS)[number], step: number) => string)[] = [(c) => c.title, (c, step) => (c.key === "phase" ? `step ${step}` : c.sums)];

/** What SHARE OF PEAK leaves out: the part of the step's peak allocated before the step. */
export function shareNote(b: StepBreakdown): string {
  const peak = b.peak.allocated_bytes;
  if (peak <= 0) return "SHARE OF PEAK: what each phase of this step allocated and still held at the step's peak";
  const shares = b.phases.reduce((a, p) => a + p.held_at_step_peak_bytes, 0);
  const rest = Math.max(0, peak - shares);
  return `SHARE OF PEAK: of the step's peak; the other ${Math.round((rest / peak) * 100)}% (${formatBytes(rest)}) was held from earlier steps (parameters, optimizer state…)`;
}

/** Step `step`'s breakdown where the model keeps that step, else null. */
function keptStep(m: ProcessModel["model"], device: number, step: number): StepBreakdown | null {
  const d = m.device(device);
  if (!d || (d.cur.step !== step && !d.steps.some((r) => r.step === step))) return null;
  return breakdown(m, { device, step });
}

/** For an agent `gpumem-tui attach` started: when, where steps count from, and what the seed
 *  brought in from before the attach. Null for a process started with the agent. */
export function attachedLine(pm: ProcessModel): string | null {
  if (pm.attachedNs === undefined || pm.attachedNs === null) return null;
  const at = new Date(pm.attachedNs / 1e6).toTimeString().slice(0, 8);
  const s = pm.model.seedStatus;
  const seed =
    s === null
      ? "no seed: memory from before the attach is unknown"
      : s.state === "applied"
        ? `before the attach: ${formatBytes(s.bytes)} in ${counted(s.blocks, "block")}`
        : s.state === "pending"
          ? "before the attach: being read"
          : `no seed (${s.reason}): memory from before the attach is unknown`;
  return `attached at ${at}, step 0 = until the first optimizer step after it; ${seed}`;
}

/** `found`: the process's findings of the store's state (absent: computed here). */
/** A recorded machine's NVML figure of the process (the demo's track) and what PyTorch left of it
 *  then: NVML less reserved at the sample's moment, as the Overview's row has them. */
export interface SampledNvml {
  used_bytes: number | null;
  non_pytorch_bytes: number | null;
  /** The ledger at that sample (the track's, beside the replay's figures at its moment), or null. */
  ledger?: Ledger | null;
}

/** The Overview's row of a recorded process (the demo), where its document has one: its NVML
 *  figures were sampled at a moment up to an interval before the replay's, so non-PyTorch is taken
 *  there, never as NVML less the replay's reserved now (-17 GiB while the allocator grew). */
export function sampledNvml(doc: ScreenProps["state"]["doc"], pm: ProcessModel | undefined): SampledNvml | null {
  if (!doc || !pm) return null;
  const row = doc.processes.find((q) => q.recorded && q.pytorch && (q.pid === pm.pid || q.agent_pid === pm.pid));
  return row?.pytorch ? { used_bytes: row.used_bytes, non_pytorch_bytes: row.pytorch.non_pytorch_bytes ?? null, ledger: row.pytorch.ledger ?? null } : null;
}

/** The document's forecast of the process (its room from NVML), where the document has one; else,
 *  for a live process, the one the headless document has (`--json`): the first of its rows with a
 *  basis, in the room that row gives (document.ts rowForecastRoom). The screens' documents carry
 *  none (collect/live.ts): this screen alone reads it, so it is made only while it is shown. */
export function docForecast(doc: ScreenProps["state"]["doc"], pm: ProcessModel | undefined): Forecast | null {
  if (!doc || !pm) return null;
  const row = doc.processes.find((q) => q.pytorch?.forecast && (q.pid === pm.pid || q.agent_pid === pm.pid));
  if (row) return (row.pytorch!.forecast as Forecast | undefined) ?? null;
  // As LiveModels.detail gives it: a live agent's model, not a ring left unread.
  if (pm.source !== "live" || pm.unread) return null;
  for (const q of doc.processes) {
    if (q.recorded || !q.pytorch || q.agent_pid !== pm.pid) continue;
    const basis = forecastBasis(pm.model, q.pytorch.device);
    if (basis) return forecastAt(basis, rowForecastRoom(doc, q)!, growthPerStep(q.pytorch.profile));
  }
  return null;
}

export function ProcessScreen({ pm, found, width, height, ascii, when = null, sampled = null, forecast = null }: { pm: ProcessModel | undefined; found?: FindingGroup[]; width: number; height: number; ascii: boolean; when?: number | null; sampled?: SampledNvml | null; forecast?: Forecast | null }) {
  if (!pm) return <Text dimColor>No PyTorch process with the agent. Start one with `gpumem-tui run -- python train.py`, or press D for a replay.</Text>;
  const m = pm.model;
  // What the agent runs without, and why ("names: off: RuntimeError: …"): one line each.
  const notes = Object.entries(pm.notes ?? {}).map(([feature, sentence]) => `${feature}: ${sentence}`);
  const attached = attachedLine(pm);
  if (attached) notes.unshift(attached);
  const noteLines = notes.map((n, i) => (
    <Text key={n} color={color(attached && i === 0 ? "cyan" : "yellow")}>{cutWords(n, width - 1)}</Text>
  ));
  if (m.devices.length === 0) {
    return (
      <Box flexDirection="column">
        <Text dimColor>pid {pm.pid}: no allocator events yet ({pm.title})</Text>
        {noteLines}
      </Box>
    );
  }
  // The first device with allocator events: the breakdown and the timeline are made of them.
  const all = summary(m).devices;
  const s = all.find((d) => m.device(d.device) !== undefined) ?? all[0]!;
  // The whole run while it is under ten minutes, then the last ten, on a uniform time axis.
  // Each finding once, by its title; Enter opens them whole (the Findings screen).
  const allFindings = found ?? distinctFindings(findings(m));
  let f = allFindings.slice(0, 3);
  // Will it fit (forecast.ts): the document's, in NVML's room; else the model's own, in the
  // allocator's limit where the agent said one (a replay), with the growth finding's rate.
  const growth = allFindings.find((x) => x.id === "growth")?.numbers.growth_per_step_bytes;
  const fb = forecast ? null : forecastBasis(m, s.device);
  const fc = forecast ?? (fb ? forecastAt(fb, { total_bytes: null, outside_bytes: null }, typeof growth === "number" ? growth : null) : null);
  // A past step (`[` `]`): its own breakdown, where the model still keeps it.
  const b = (when !== null && keptStep(m, s.device, when)) || breakdown(m, { device: s.device });
  // Reserved but unallocated, on a line of its own: now, and at the last step's peak (now swings
  // within a step); a snapshot's private pools beside it, never counted in it.
  const dev = m.device(s.device);
  const u = dev ? unallocatedView(m, dev) : null;
  const pools = poolsLine(u ? u.private_pools : null);
  const unallocated = (u ? unallocatedLine(u) : `${UNALLOCATED} ${formatBytes(s.reserved_unallocated_bytes)} now`) + (pools ? `; not counted: ${pools}` : "");
  // What is outside PyTorch (the ledger): the context, each library by its marks, unexplained; a
  // line under the headline, the first to give way on a short terminal. A recorded machine's NVML
  // (the demo) was sampled at another moment than the model's figures: its document's ledger (made
  // at the sample's moment), never the model's.
  const outside = pm.snapshot ? null : sampled ? (sampled.ledger ?? null) : outsideLedger(m, s, u ? u.private_pools : null);
  // Lines that are not charts: title, 3 headline lines, 2 chart labels, phase band, marks, time
  // axis, the agent's notes, the findings (a heading and at least one line), the step, its peak in words, the table's
  // two header lines, its phases and what the shares leave out. The two charts share what is left (up to
  // 10 rows each, more where the ranges' list leaves rows free), ranges get the rest.
  // Charts are at least MIN_CHART_ROWS tall: where two do not fit, one shows both (allocated as
  // the area, reserved as a dotted line over it).
  // A snapshot has no title line, nor allocated and reserved: the frame's header says them
  // (snapshot-header.ts); its peak joins the line of its OOMs and steps.
  const snap = pm.snapshot ?? null;
  // The headline: short pieces laid in as many lines as the width needs (./flow.tsx), never a
  // figure cut; reserved but unallocated on lines of its own, broken after its clauses.
  // One peak on the screen, torch's: a second figure only with its cause (queries.ts peakOf).
  const nvmlUsed = sampled ? sampled.used_bytes : s.nvml_used_bytes;
  const nonPytorch = sampled ? sampled.non_pytorch_bytes : s.non_pytorch_bytes;
  const peak: Piece = { text: `peak ${formatBytes(s.peak_allocated_bytes)}${s.peak_note ? ` (${s.peak_note})` : ""}` };
  const headline: Piece[] = [
    { text: `allocated ${formatBytes(s.allocated_bytes)}`, node: <>allocated <Text bold color={color("green")}>{formatBytes(s.allocated_bytes)}</Text></> },
    { text: `reserved ${formatBytes(s.reserved_bytes)}`, node: <>reserved <Text bold color={color("yellow")}>{formatBytes(s.reserved_bytes)}</Text></> },
    peak,
    { text: `NVML ${nvmlUsed === null ? "n/a" : formatBytes(nvmlUsed)}` },
    { text: `non-PyTorch ${nonPytorch === null ? "n/a" : formatBytes(nonPytorch)}` },
  ];
  const status: Piece[] = [
    snap ? peak : { text: `retries ${s.n_retries ?? "n/a"}` },
    { text: `OOMs ${s.n_oom}`, node: <>OOMs <Text color={color(s.n_oom ? "red" : "white")}>{s.n_oom}</Text></> },
    { text: `step ${s.step}` },
    { text: `phase ${phaseLabel(s.phase)}`, node: <>phase <Text bold>{phaseLabel(s.phase)}</Text></> },
    ...(s.range_name ? [{ text: `range ${s.range_name}` }] : []),
    ...(s.partial ? [{ text: `(block detail partial: ${s.partial_causes.join("; ")})` }] : []),
  ];
  const unallocatedPieces = clausePieces(unallocated);
  const w = width - 1;
  // The charts' window and the phase strip under them (its legend's lines count in the budget).
  const chartWidth = Math.max(20, width - 2 - GUTTER);
  const toUs = s.last_time_us ?? 0;
  const fromUs = Math.max(s.first_time_us ?? toUs, toUs - 600e6);
  const strip = phaseStrip(phaseShares(m, s.device, fromUs, toUs, chartWidth), (toUs - fromUs) / chartWidth, ascii);
  // The legend's pieces (each phase's share in mixed columns, the letters, blank) each whole, in as
  // many lines as the width needs: cut at the line's end it lost "o outside them" at 120 columns.
  // The mixed columns' shares are pieces of their own ("F 31%"), so a narrow line breaks between them.
  // The letters' words stay together where a line holds them (the shares on one line, what the
  // letters mean on the next), else each whole.
  const legendWidth = w - GUTTER;
  const mixedFirst = /^\S+ phases mixed/.test(strip.parts[0] ?? "");
  const words = strip.parts.slice(mixedFirst ? 1 : 0);
  const legendParts = [...(mixedFirst ? [strip.parts[0]!] : []), ...(words.length && textWidth(words.join("  ")) <= legendWidth ? [words.join("  ")] : words)];
  const legendPieces: Piece[] = legendParts.flatMap((t, i) => {
    const [head, ...shares] = (i ? t : `phase: ${t}`).split(/(?<=:) (?=\S+ \d+%)|(?<=%) (?=\S \d+%)/);
    return [{ text: head! }, ...shares.map((x) => ({ text: x, sep: " " }))];
  });
  let legendLines = flowLines(legendPieces, legendWidth);
  const extraLines = (pieces: Piece[]) => flowLines(pieces, w) - 1;
  let fixedLines = (snap ? 14 : 16) + (fc ? 2 : 0) + legendLines - 1 + notes.length + Math.max(1, f.length) + b.phases.length + (snap ? 0 : extraLines(headline)) + extraLines(status) + extraLines(unallocatedPieces);
  // On a short terminal the table's rows keep their lines: the peak's composition in words gives
  // its line first, then the findings after the first (the heading counts them; Enter shows all).
  if (outside) fixedLines++;
  const short = () => height - fixedLines < MIN_CHART_ROWS - 1;
  // The forecast's lines give way first, its basis before it: they look ahead, the rest says what is.
  const shownFc = { basis: fc !== null, line: fc !== null };
  if (short() && shownFc.basis) (shownFc.basis = false), fixedLines--;
  if (short() && shownFc.line) (shownFc.line = false), fixedLines--;
  const showOutside = outside !== null && !short();
  if (outside && !showOutside) fixedLines--;
  const showWords = !short();
  if (!showWords) fixedLines--;
  // Then the reserved but unallocated line joins the end of the line above it.
  const ownLine = !short();
  if (!ownLine) fixedLines += flowLines([...status, ...unallocatedPieces], w) - flowLines(status, w) - flowLines(unallocatedPieces, w);
  while (short() && f.length > 1) (f = f.slice(0, -1)), fixedLines--;
  // Then the lines that explain rather than tell, one by one: the shares' note, the findings'
  // heading (each finding says its severity), the chart's title (the legend under it names the
  // phases; its axis the bytes), what each column sums, last the phase strip's legend.
  const keep = { share: true, sums: true, legend: true, heading: true, label: true };
  // (First the phase strip's legend in one line: the pieces that fit it.)
  if (short() && legendLines > 1) (fixedLines -= legendLines - 1), (legendLines = 1);
  for (const k of ["share", "heading", "label", "sums", "legend"] as const) if (short()) (keep[k] = false), fixedLines--;
  // Last (60×15), the chart and its lines give way: a chart of fewer rows reads as a line, and
  // the figures above and the step's table below say more.
  const chart = !short();
  if (!chart) fixedLines -= 3 + (keep.label ? 2 : 1) + (keep.legend ? legendLines : 0);
  const both = chart && height - fixedLines >= 2 * MIN_CHART_ROWS;
  // The charts take up to 10 rows each, and more where the rows are free once the ranges' list
  // has its rows (a header and a row each), up to a third of the screen each.
  const rangeNeed = b.ranges.length ? b.ranges.length + 1 : 0;
  const tallest = Math.max(10, Math.floor(height / 3));
  const chartRows = !chart
    ? 0
    : both
      ? Math.min(tallest, Math.max(Math.min(10, Math.floor((height - fixedLines) / 2)), Math.floor((height - fixedLines - rangeNeed) / 2)))
      : Math.max(MIN_CHART_ROWS, Math.min(tallest, Math.max(Math.min(10, height - fixedLines + 1), height - fixedLines - rangeNeed + 1)));
  // The ranges' list: its header, then a row each.
  let rangeRows = Math.max(0, height - fixedLines - (both ? 2 * chartRows : chart ? chartRows - 1 : 0) - 1);
  // The forecast's lines give way to the ranges' rows too (what the step is made of), basis first.
  for (const k of ["basis", "line"] as const) if (rangeRows < b.ranges.length && shownFc[k]) (shownFc[k] = false), rangeRows++;
  const points = ascii ? chartWidth : chartWidth * 2;
  const tl = timeline(m, { device: s.device, resolution_us: (toUs - fromUs) / points, since_us: fromUs });
  const buckets = tl.buckets;
  const reservedMax = Math.max(1, ...buckets.map((b) => b.reserved_max_bytes), ...buckets.map((b) => b.nvml_used_max_bytes ?? 0));
  const series = (pick: (b: (typeof buckets)[number]) => [number, number]) =>
    onTimeAxis(buckets.map((b) => ({ start_us: b.start_us, max: pick(b)[0], last: pick(b)[1] })), fromUs, toUs, points);
  const allocSeries = series((b) => [b.allocated_max_bytes, b.allocated_last_bytes]);
  const withNvml = buckets.filter((b) => b.nvml_used_max_bytes !== null);
  const nvml = withNvml.length
    ? onTimeAxis(withNvml.map((b) => ({ start_us: b.start_us, max: b.nvml_used_max_bytes!, last: b.nvml_used_last_bytes! })), fromUs, toUs, points)
    : undefined;
  // Drawn to a round top (20 GiB for 18.46 GiB reserved), so that the axis's ticks are true.
  const scale = byteScale(reservedMax);
  const withAxis = (lines: string[]) => yAxis(lines.length, scale, ascii).map((g, i) => g + lines[i]);
  const reservedSeries = series((b) => [b.reserved_max_bytes, b.reserved_last_bytes]);
  const alloc = withAxis(areaChart(allocSeries, { width: chartWidth, height: chartRows, max: scale.top, ascii, line: both ? undefined : reservedSeries }));
  const resv = both ? withAxis(areaChart(reservedSeries, { width: chartWidth, height: chartRows, max: scale.top, ascii, line: nvml })) : [];
  // Under the charts: the phase of each column (strip, above), and where the window's peak and any OOM fall.
  let peakAt = -1;
  for (let i = 0; i < allocSeries.length; i++) if (!Number.isNaN(allocSeries[i]!) && (peakAt < 0 || allocSeries[i]! > allocSeries[peakAt]!)) peakAt = i;
  const chartPeak = peakAt >= 0 ? allocSeries[peakAt]! : null;
  const marks = [
    ...oomColumns(m, s.device, fromUs, toUs, chartWidth).map((column) => ({ column, mark: "X", label: "OOM" })),
    ...(chartPeak !== null ? [{ column: Math.floor((peakAt * chartWidth) / points), mark: "^", label: `peak ${formatBytes(chartPeak)}` }] : []),
    ...(when !== null && b.step === when && b.peak.time_us !== null && b.peak.time_us >= fromUs
      ? [{ column: Math.min(chartWidth - 1, Math.floor(((b.peak.time_us - fromUs) / Math.max(1, toUs - fromUs)) * chartWidth)), mark: "v", label: `step ${when}'s peak` }]
      : []),
  ];
  const share = shareNote(b);
  const stepCols = stepColumns(w);
  const state = pm.ended ? (pm.source === "replay" ? "replay finished" : "exited") : pm.source === "replay" ? "replaying" : "live";
  return (
    <Box flexDirection="column">
      {snap ? null : (
        <Text>
          <Text bold color={color("cyan")}>pid {pm.pid}</Text> <Text dimColor>[{state}] {cutMiddle(pm.title, Math.max(10, w - `pid ${pm.pid} [${state}] `.length))}</Text>
        </Text>
      )}
      {snap ? null : <Flow pieces={headline} width={w} />}
      <Flow pieces={ownLine ? status : [...status, ...unallocatedPieces]} width={w} />
      {ownLine ? <Flow pieces={unallocatedPieces} width={w} /> : null}
      {showOutside ? <Text>{outsideWords(outside!, w)}</Text> : null}
      {noteLines}
      {chart ? (
        <>
          {both ? <Text dimColor wrap="truncate-end">{" ".repeat(GUTTER)}reserved{nvml ? ", dotted: NVML used" : ""} (each column keeps its maximum)</Text> : null}
          {resv.map((line, i) => (
            <Text key={i} color={color("yellow")}>{line}</Text>
          ))}
          {both || keep.label ? <Text dimColor wrap="truncate-end">{" ".repeat(GUTTER)}{both ? "allocated" : "allocated, dotted: reserved (each column keeps its maximum)"}</Text> : null}
          {alloc.map((line, i) => (
            <Text key={i} color={color("green")}>{line}</Text>
          ))}
          <Text wrap="truncate-end">
            <Text dimColor>{pad("phase", GUTTER - 1, true)} </Text>
            {strip.runs.map((r, i) => (
              <Text key={i} color={color(PHASE_COLORS[r.phase] ?? "gray")}>{r.text}</Text>
            ))}
          </Text>
          {keep.legend ? (
            <Box flexDirection="column" paddingLeft={GUTTER}>
              <Flow pieces={legendLines > 1 ? legendPieces : legendPieces.slice(0, flow(legendPieces.map((x) => x.text), legendWidth)[0]!.length)} width={legendWidth} dim />
            </Box>
          ) : null}
          <Text color={color("red")}>{" ".repeat(GUTTER)}{markLine(chartWidth, marks)}</Text>
          <Text dimColor>{snap ? recordingAxis(chartWidth, fromUs - (s.first_time_us ?? fromUs), toUs - (s.first_time_us ?? fromUs)) : timeAxis(chartWidth, toUs - fromUs, pm.ended ? "end" : "now")}</Text>
        </>
      ) : null}
      {keep.heading ? <Text bold>Findings{allFindings.length ? <Text dimColor>{`  (${allFindings.length}; Enter shows each whole, with its numbers)`}</Text> : null}</Text> : null}
      {f.length === 0 ? <Text dimColor>  nothing wrong found</Text> : null}
      {f.map((x, i) => (
        <Text key={i} color={color(x.severity === "error" ? "red" : x.severity === "warning" ? "yellow" : "white")}>
          {pad(cutWords(`  ${x.severity}: ${x.title}${x.count > 1 ? ` (${x.count} times)` : ""}${x.id === "growth" && fc?.time_to_oom ? `; ${oomWords(fc.time_to_oom)}` : ""}`, width - 1), width - 1)}
        </Text>
      ))}
      <Text bold>
        {when !== null && b.step === when ? <Text color={color("yellow")}>PAST </Text> : null}Step {b.step}{b.complete ? "" : " (running)"}{when !== null && b.step !== when ? ` (step ${when} is no longer kept)` : ""}: peak {formatBytes(b.peak.allocated_bytes)} {b.peak.phase ? inPhase(b.peak.phase) : ""}
      </Text>
      {showWords ? <Text dimColor>{cutWords(b.peak.words, width - 1)}</Text> : null}
      {STEP_HEADER.slice(0, keep.sums ? 2 : 1).map((cell, i) => (
        <Text key={i} inverse>{stepCols.map((c, k) => pad(cell(c, b.step), c.width, k > 0)).join("")}</Text>
      ))}
      {b.phases.map((p) => {
        // A phase the step never entered has no figures: "–", not zeros (a snapshot has no phases).
        const none = p.entries === 0 && p.n_alloc === 0 && p.peak_allocated_bytes === null;
        const v = (x: string) => (none ? UNKNOWN : x);
        return (
          <Text key={p.phase} dimColor={none}>
            {stepCols.map((c, k) => pad(k === 0 ? phaseLabel(p.phase) : c.key === "peak" ? c.cell!(p) : v(c.cell!(p)), c.width, k > 0)).join("")}
          </Text>
        );
      })}
      {keep.share ? <Text dimColor>{cutWords(share, width - 1)}</Text> : null}
      {shownFc.line && fc ? <Text>{cutWords(`Forecast: ${fc.words}`, width - 1)}</Text> : null}
      {shownFc.basis && fc ? <Text dimColor>{cutWords(`  basis: ${fc.basis}`, width - 1)}</Text> : null}
      {rangeRows > 0 && b.ranges.length ? <Text inverse>{pad("RANGE (record_function)", 40)}{pad("ALLOCATED IN STEP", 18, true)}{pad("  every allocation in the range this step, added up (freed ones too)", Math.max(0, width - 59))}</Text> : null}
      {b.ranges.slice(0, rangeRows).map((r) => (
        <Text key={r.range} dimColor>
          {pad(`  ${r.name ?? `range ${r.range}`}`, 40)}{pad(formatBytes(r.alloc_bytes), 18, true)}
        </Text>
      ))}
    </Box>
  );
}

/** The Process screen in the frame: Enter opens its findings whole (the Findings screen). */
export const processScreen = {
  id: "process",
  key: "2",
  title: "Process",
  component: (p) => <ProcessScreen pm={p.pm} found={p.pm && p.state.findings.get(p.pm.pid)} width={p.width} height={p.height} ascii={p.ascii} when={p.ui.when} sampled={sampledNvml(p.state.doc, p.pm)} forecast={docForecast(p.state.doc, p.pm)} />,
  onKey: (ui, key, ctx) => (isKey(key, "return") ? (ctx.show(ui, "findings"), true) : false),
} as const satisfies ScreenSpec;
