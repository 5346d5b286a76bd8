// One segment opened (Enter on the Segments screen): its blocks in address order with the free
// ranges between them, each block with its name (or what is known of it), shape, dtype and age,
// as memory_viz users read a segment. Esc goes back to the list.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { segmentInside, type SegmentPart } from "../../profiler";
import { firstShown, rowUnder } from "./scroll";
import { segmentStrip } from "./segment-strip";
import { formatShape } from "./tensors";
import { color, formatBytes, formatDuration, pad, UNKNOWN } from "../format";

interface Column {
  title: string;
  width: number;
  right?: boolean;
  cell: (p: SegmentPart) => string;
}

function opened(pm: ProcessModel, address: number) {
  return segmentInside(pm.model, { device: pm.model.devices[0]?.device, address });
}

/** The rows the view has room for (they start at line 3, below the totals, the strip and the
 *  column titles). */
const partsRoom = (height: number) => Math.max(3, height - 4);

/** How many rows (blocks and free ranges) the opened segment lists. */
export function segmentPartCount(pm: ProcessModel, address: number): number {
  return opened(pm, address)?.parts.length ?? 0;
}

/** The row under line `line` of the screen, for a click; or null. */
export function segmentPartAt(pm: ProcessModel, address: number, height: number, selected: number, line: number): number | null {
  return rowUnder(segmentPartCount(pm, address), partsRoom(height), selected, 3, line);
}

export function SegmentView({ pm, address, width, height, ascii, selected }: { pm: ProcessModel; address: number; width: number; height: number; ascii: boolean; selected: number }) {
  const seg = opened(pm, address);
  if (!seg) return <Text dimColor>The segment at 0x{address.toString(16)} is gone (released since: empty_cache, or an OOM's retry). Esc: back to the list.</Text>;
  const nowUs = pm.model.devices[0]?.lastTime_us ?? 0;
  const room = partsRoom(height);
  const first = firstShown(seg.parts.length, room, selected);
  // OFFSET, SIZE, NAME, SHAPE and DTYPE always; AGE and CATEGORY where the name keeps 28 columns.
  const cols: Column[] = [
    { title: "OFFSET", width: 11, right: true, cell: (p) => `+${formatBytes(p.offset_bytes)}` },
    { title: "SIZE", width: 11, right: true, cell: (p) => formatBytes(p.kind === "free" ? p.size_bytes : p.block.size_bytes) },
    { title: "", width: 2, cell: () => "" },
    { title: "NAME", width: 0, cell: (p) => (p.kind === "free" ? "(free)" : p.block.label) },
    { title: "", width: 1, cell: () => "" },
    { title: "SHAPE", width: 14, cell: (p) => (p.kind === "free" ? "" : formatShape(p.block.shape) || UNKNOWN) },
    { title: "DTYPE", width: 10, cell: (p) => (p.kind === "free" ? "" : (p.block.dtype ?? UNKNOWN)) },
  ];
  let left = width - 1 - cols.reduce((a, c) => a + c.width, 0);
  for (const c of [
    { title: "AGE ", width: 9, right: true, cell: (p: SegmentPart) => (p.kind === "free" ? "" : `${formatDuration(Math.max(0, nowUs - p.block.time_us) / 1e6)} `) },
    { title: "CATEGORY", width: 15, cell: (p: SegmentPart) => (p.kind === "free" ? "" : p.block.category) },
  ]) {
    if (left - c.width < 28) break;
    cols.push(c);
    left -= c.width;
  }
  cols[3]!.width = left; // NAME takes what is left
  const line = (f: (c: Column) => string) => cols.map((c) => pad(f(c), c.width, c.right)).join("");
  const used = seg.parts.flatMap((p) => (p.kind === "block" ? [{ offset: p.offset_bytes, size: p.block.size_bytes }] : []));
  const blocks = seg.parts.filter((p) => p.kind === "block").length;
  return (
    <Box flexDirection="column">
      <Text wrap="truncate-end">
        <Text bold>segment 0x{seg.address.toString(16)}</Text>: {formatBytes(seg.size_bytes)}, {blocks} block{blocks === 1 ? "" : "s"} holding {formatBytes(seg.allocated_bytes)}, {formatBytes(seg.size_bytes - seg.allocated_bytes)} free  <Text dimColor>(Esc: back)</Text>
      </Text>
      <Text color={color("green")}>{segmentStrip(seg.size_bytes, used, Math.max(10, width - 1), ascii)}</Text>
      <Text inverse>{line((c) => c.title)}</Text>
      {seg.parts.slice(first, first + room).map((p, i) => (
        <Text key={p.offset_bytes} inverse={first + i === selected} dimColor={p.kind === "free" || p.block.name === null}>
          {line((c) => c.cell(p))}
        </Text>
      ))}
    </Box>
  );
}
