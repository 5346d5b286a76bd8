// Findings: what is wrong with the selected process, each finding once and whole (wrapped, never
// cut), the selected one opened with Enter: its evidence and every number behind it.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { distinctFindings, findings, type FindingGroup } from "../../profiler";
import { color, formatBytes, pad, textWidth, wrap } from "../format";
import { isKey, type ScreenSpec } from "../screen-spec";
import { whose } from "../snapshot-header";
import { gpuFindingWords } from "./held-memory";

const SEVERITY_COLOR = { error: "red", warning: "yellow", info: "white" } as const;

/** A process's findings, each once (the store computes them once a tick: ScreenState.findings). */
export function processFindings(pm: ProcessModel | undefined): FindingGroup[] {
  return pm ? distinctFindings(findings(pm.model)) : [];
}

/** A line of the screen, and which finding it belongs to (null: a heading). */
export interface FindingLine {
  text: string;
  finding: number | null;
  title: boolean;
}

function heading(f: FindingGroup): string {
  const times = f.count > 1 ? ` (${f.count} times${f.steps.length ? `, steps ${f.steps.join(", ")}` : ""})` : "";
  return `${f.severity.toUpperCase()}  ${f.title}${times}`;
}

/** A number as read: bytes with their unit (and the exact count), others as they are. */
function numberText(key: string, v: number | string | null): string {
  if (v === null) return "–";
  if (typeof v === "number" && key.endsWith("_bytes")) return `${formatBytes(v)} (${v})`;
  return String(v);
}

/** Every line of the list (each finding's title, then its evidence wrapped), and the first shown. */
export function findingsLayout(fs: FindingGroup[], width: number, height: number, selected: number, open: number | null): { lines: FindingLine[]; first: number } {
  const lines: FindingLine[] = [];
  if (open !== null && fs[open]) {
    const f = fs[open]!;
    for (const t of wrap(heading(f), width - 1)) lines.push({ text: t, finding: open, title: true });
    lines.push({ text: `device ${f.device}, finding "${f.id}" (Enter or Esc: back to the list)`, finding: null, title: false });
    for (const l of wrap(f.evidence, width - 3)) lines.push({ text: `  ${l}`, finding: null, title: false });
    lines.push({ text: "", finding: null, title: false });
    const keyWidth = Math.min(28, Math.max(...Object.keys(f.numbers).map((k) => k.length)) + 2);
    for (const [k, v] of Object.entries(f.numbers)) {
      for (const l of wrap(`${pad(k, keyWidth)}${numberText(k, v)}`, width - 3)) lines.push({ text: `  ${l}`, finding: null, title: false });
    }
    return { lines, first: 0 };
  }
  fs.forEach((f, i) => {
    for (const t of wrap(heading(f), width - 1)) lines.push({ text: t, finding: i, title: true });
    for (const l of wrap(f.evidence, width - 5)) lines.push({ text: `    ${l}`, finding: i, title: false });
  });
  // The selected finding's title in view, and as much of its evidence as fits.
  const at = lines.findIndex((l) => l.title && l.finding === selected);
  const end = lines.findLastIndex((l) => l.finding === selected);
  const room = Math.max(1, height - 1);
  let first = Math.max(0, Math.min(end - room + 1, lines.length - room));
  if (at >= 0 && first > at) first = at;
  return { lines, first };
}

/** The finding under line `line` of the screen's body (line 0 is the screen's own heading). */
export function findingAt(fs: FindingGroup[], width: number, height: number, selected: number, open: number | null, line: number): number | null {
  if (line < 1 || open !== null) return null;
  const { lines, first } = findingsLayout(fs, width, height, selected, open);
  return lines[first + line - 1]?.finding ?? null;
}

/** The GPUs' findings' lines shown: each wrapped, at most half the screen (the process's keep the rest). */
function gpuShown(gpu: string[], width: number, height: number): string[] {
  const lines = gpu.flatMap((w) => wrap(`WARNING  ${w}`, width - 1).map((l, i) => (i ? `    ${l}` : l)));
  return lines.slice(0, Math.max(0, Math.floor((height - 2) / 2)));
}

/** The GPU findings (memory held by a gone pid: held-memory), wrapped, above the process findings. */
function GpuLines({ lines }: { lines: string[] }) {
  return (
    <>
      {lines.map((l, i) => (
        <Text key={`gpu-${i}`} bold={l.startsWith("WARNING")} color={color("yellow")}>{l}</Text>
      ))}
    </>
  );
}

/** `found`: the process's findings of the store's state (absent: computed here); `gpu`: the GPUs'
 *  findings in words (they belong to no process: shown whichever is selected, or none). */
export function FindingsScreen({ pm, found, gpu = [], width, height, selected, open }: { pm: ProcessModel | undefined; found?: FindingGroup[]; gpu?: string[]; width: number; height: number; selected: number; open: number | null }) {
  const shownGpu = gpuShown(gpu, width, height);
  height -= shownGpu.length;
  if (!pm) return <Box flexDirection="column"><GpuLines lines={shownGpu} /><Text dimColor>No PyTorch process with the agent selected (Overview: ↑ ↓, Enter).</Text></Box>;
  const fs = found ?? processFindings(pm);
  if (fs.length === 0) return <Box flexDirection="column"><GpuLines lines={shownGpu} /><Text dimColor>{whose(pm)}: nothing wrong found.</Text></Box>;
  const { lines, first } = findingsLayout(fs, width, height, selected, open);
  return (
    <Box flexDirection="column">
      <GpuLines lines={shownGpu} />
      <Text dimColor>{pad(findingsHead(`${whose(pm)}: ${fs.length} finding${fs.length === 1 ? "" : "s"}`, open === null, width - 1), width - 1)}</Text>
      {lines.slice(first, first + height - 1).map((l, i) => {
        const f = l.finding === null ? null : fs[l.finding]!;
        return (
          <Text key={first + i} bold={l.title} inverse={l.title && open === null && l.finding === selected} color={color(l.title && f ? SEVERITY_COLOR[f.severity] : "white")}>
            {pad(l.text, width - 1)}
          </Text>
        );
      })}
    </Box>
  );
}

/** The findings the store computed for the shown process this tick. */
const foundOf = (p: { pm: ProcessModel | undefined; state: { findings: Map<number, FindingGroup[]> } }) => (p.pm ? (p.state.findings.get(p.pm.pid) ?? []) : []);

/** The Findings screen in the frame: Enter (or a click on the selected one) opens a finding whole,
 *  Enter again or Esc closes it; moving the selection closes it too. */
export const findingsScreen = {
  id: "findings",
  key: "6",
  title: "Findings",
  component: (p) => <FindingsScreen pm={p.pm} found={foundOf(p)} gpu={gpuFindingWords(p.state.doc)} width={p.width} height={p.height} selected={p.selected} open={p.ui.openFinding} />,
  rows: (p) => foundOf(p).length,
  rowTexts: (p) => foundOf(p).map((f) => `${f.severity} ${f.title} ${f.evidence}`),
  rowAt: (p, line) => {
    // Below the GPUs' lines, the process's list as findingAt reads it.
    const g = gpuShown(gpuFindingWords(p.state.doc), p.width, p.height).length;
    return findingAt(foundOf(p), p.width, p.height - g, p.selected, p.ui.openFinding, line - g);
  },
  onSelect: (ui) => void (ui.openFinding = null),
  onClickSelected: (ui, row) => ((ui.openFinding = ui.openFinding === row ? null : row), true),
  onKey: (ui, key, ctx) => {
    // Esc closes an opened finding; with none open it is the frame's (the past, then the Overview).
    if (isKey(key, "escape") || isKey(key, "backspace")) {
      if (ui.openFinding === null) return isKey(key, "backspace");
      return (ui.openFinding = null), true;
    }
    if (!isKey(key, "return")) return false;
    const at = ui.selected[ui.screen]!;
    ui.openFinding = ui.openFinding === at || ctx.rows(ui) === 0 ? null : at;
    return true;
  },
} as const satisfies ScreenSpec;

/** The screen's first line in `width`: the count, "most severe first" and the keys where they fit,
 *  else fewer words (at 60 columns it read "(↑ ↓ select, Enter …"), never a key's words cut. */
export function findingsHead(count: string, keys: boolean, width: number): string {
  const tries = [`${count}, most severe first${keys ? "  (↑ ↓ select, Enter opens)" : ""}`, `${count}${keys ? "  (↑ ↓, Enter opens)" : ""}`, count];
  return tries.find((t) => textWidth(t) <= width) ?? count;
}
