// Segments: each cudaMalloc'd segment as a strip of its blocks, used and free, so that where the
// reserved but unallocated memory lies (whole free segments, or pieces between live blocks) shows
// at a glance.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { poolsLine, segments, unallocatedLine, unallocatedView, type UnallocatedView } from "../../profiler";
import { color, formatBytes, pad } from "../format";
import { isKey, type ScreenSpec } from "../screen-spec";
import { PRIVATE_POOLS, UNALLOCATED } from "../../words";
import { firstShown, rowUnder } from "./scroll";
import { segmentStrip } from "./segment-strip";
import { segmentPartAt, segmentPartCount, SegmentView } from "./segment-view";

/** The segments as the screen lists them: largest first. */
export function segmentsInOrder(pm: ProcessModel | undefined) {
  if (!pm || pm.model.devices.length === 0) return [];
  return [...segments(pm.model, { withBlocks: true }).segments].sort((a, b) => b.size_bytes - a.size_bytes);
}

/** The rows the list has room for (they start at line 4, below the totals, the private pools,
 *  the Enter hint and the column titles). */
const listRoom = (height: number) => Math.max(3, height - 6);

/** The segment (its place in the list) under line `line` of the screen, for a click; or null. */
export function segmentRowAt(count: number, height: number, selected: number, line: number): number | null {
  return rowUnder(count, listRoom(height), selected, 4, line);
}

/** The private pools line: always drawn, so that the list starts on the same line. */
function privatePoolsLine(pools: UnallocatedView["private_pools"]): string {
  if (pools === null) return `${PRIVATE_POOLS}: not told apart, their memory counts above (a ring's records carry no pool id; a snapshot's segments do)`;
  return poolsLine(pools) ?? `${PRIVATE_POOLS}: none`;
}

export function SegmentsScreen({ pm, width, height, ascii, selected }: { pm: ProcessModel | undefined; width: number; height: number; ascii: boolean; selected: number }) {
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  const map = segments(pm.model, { withBlocks: true });
  const segs = segmentsInOrder(pm);
  const room = listRoom(height);
  const first = firstShown(segs.length, room, selected);
  const stripWidth = Math.max(10, width - 44);
  const dev = pm.model.device(map.device);
  const u = dev ? unallocatedView(pm.model, dev) : null;
  const pools = privatePoolsLine(u ? u.private_pools : null);
  return (
    <Box flexDirection="column">
      <Text wrap="truncate-end">
        <Text bold>{map.segments.length} segments</Text>: reserved {formatBytes(map.reserved_bytes)}, allocated {formatBytes(map.allocated_bytes)},{" "}
        {u ? unallocatedLine(u) : `${formatBytes(map.reserved_unallocated_bytes)} ${UNALLOCATED}`}, largest free block {formatBytes(map.largest_free_bytes)}, {map.n_inactive_splits} inactive splits{map.approximate ? " (placement approximate)" : ""}
      </Text>
      <Text dimColor wrap="truncate-end">{pools}</Text>
      <Text dimColor>Enter: the selected segment's blocks (names, shapes, ages)</Text>
      <Text inverse>{pad("ADDRESS", 16)}{pad("SIZE", 11, true)}{pad("USED", 6, true)}  {pad("BLOCKS (█ used, ░ free)", stripWidth)}</Text>
      {segs.slice(first, first + room).map((s, i) => {
        const used = (s.blocks ?? []).map((b) => ({ offset: b.address - s.address, size: b.size_bytes }));
        return (
          <Text key={s.address} inverse={first + i === selected}>
            {pad(`0x${s.address.toString(16)}`, 16)}{pad(formatBytes(s.size_bytes), 11, true)}{pad(`${Math.round((s.allocated_bytes / (s.size_bytes || 1)) * 100)}%`, 6, true)}  <Text color={color("green")}>{segmentStrip(s.size_bytes, used, stripWidth, ascii)}</Text>
          </Text>
        );
      })}
    </Box>
  );
}

/** The Segments screen in the frame: the list, or one segment opened with Enter (its blocks; Esc
 *  or Backspace goes back to the list, at the segment opened). */
export const segmentsScreen = {
  id: "segments",
  key: "4",
  title: "Segments",
  component: (p) =>
    p.ui.segment && p.pm ? (
      <SegmentView pm={p.pm} address={p.ui.segment.address} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} />
    ) : (
      <SegmentsScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} />
    ),
  rows: (p) => (p.ui.segment && p.pm ? segmentPartCount(p.pm, p.ui.segment.address) : segmentsInOrder(p.pm).length),
  rowAt: (p, line) =>
    p.ui.segment && p.pm ? segmentPartAt(p.pm, p.ui.segment.address, p.height, p.selected, line) : segmentRowAt(segmentsInOrder(p.pm).length, p.height, p.selected, line),
  onKey: (ui, key, ctx) => {
    // Esc closes an opened segment; with none open it is the frame's (the past, then the Overview).
    if (isKey(key, "escape") || isKey(key, "backspace")) {
      if (!ui.segment) return isKey(key, "backspace");
      ui.selected[ui.screen] = ui.segment.listSelected;
      ui.segment = null;
      return true;
    }
    if (!isKey(key, "return")) return false;
    if (ui.segment) return true;
    const at = ui.selected[ui.screen]!;
    const seg = segmentsInOrder(ctx.pm(ui))[at];
    if (!seg) return true;
    ui.segment = { address: seg.address, listSelected: at };
    ui.selected[ui.screen] = 0; // the block list starts at its top
    return true;
  },
} as const satisfies ScreenSpec;
