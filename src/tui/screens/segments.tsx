// Segments: each cudaMalloc'd segment as a strip of its blocks, used and free, so that where the
// reserved but unallocated memory lies (whole free segments, or pieces between live blocks) shows
// at a glance.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { poolsLine, segments, unallocatedLine, unallocatedView, type UnallocatedView } from "../../profiler";
import { color, cutWords, formatBytes, pad } from "../format";
import { clausePieces, Flow, flowLines, type Piece } from "./flow";
import { isKey, type ScreenSpec } from "../screen-spec";
import { counted, PRIVATE_POOLS, UNALLOCATED } from "../../words";
import { firstShown, rowUnder } from "./scroll";
import { segmentStrip } from "./segment-strip";
import { segmentPartAt, segmentPartCount, SegmentView } from "./segment-view";
import { momentSegments, momentWords, tensorsMoment, type TensorsMoment } from "../moment";
import type { SegmentView as SegmentLine } from "../../profiler";

/** The segment map at the moment shown: now, or a peak or a past step's end (src/tui/moment.ts;
 *  null where that step's blocks are no longer kept). */
function mapAt(pm: ProcessModel, moment: TensorsMoment) {
  return moment.kind === "now" ? segments(pm.model, { withBlocks: true }) : momentSegments(pm, moment);
}

/** The segments as the screen lists them: largest first. */
export function segmentsInOrder(pm: ProcessModel | undefined, moment: TensorsMoment = { kind: "now" }) {
  if (!pm || pm.model.devices.length === 0) return [];
  return [...(mapAt(pm, moment)?.segments ?? [])].sort((a, b) => b.size_bytes - a.size_bytes);
}

/** The rows the list has room for below `head` lines (the totals, the private pools or the
 *  moment's second line, and the keys), and the column titles. */
const listRoom = (height: number, head: number) => Math.max(3, height - head - 2);

/** The segment (its place in the list) under line `line` of the screen, for a click; or null. */
export function segmentRowAt(pm: ProcessModel | undefined, width: number, height: number, moment: TensorsMoment, selected: number, line: number): number | null {
  const head = headLines(pm, width, moment);
  return rowUnder(segmentsInOrder(pm, moment).length, listRoom(height, head), selected, head + 1, line);
}

/** The totals above the list as pieces of a sentence, broken after a clause where the line ends
 *  (./flow.tsx): "73 segments: reserved 3.27 GiB, allocated 1.22 GiB, reserved but unallocated
 *  2.03 GiB now, …" never cut inside a figure. */
function totalsNow(pm: ProcessModel): Piece[] {
  const map = segments(pm.model, { withBlocks: true });
  const dev = pm.model.device(map.device);
  const u = dev ? unallocatedView(pm.model, dev) : null;
  const count = counted(map.segments.length, "segment");
  const rest = `reserved ${formatBytes(map.reserved_bytes)}, allocated ${formatBytes(map.allocated_bytes)}, ${u ? unallocatedLine(u) : `${formatBytes(map.reserved_unallocated_bytes)} ${UNALLOCATED}`}, largest free block ${formatBytes(map.largest_free_bytes)}, ${map.n_inactive_splits} inactive splits${map.approximate ? " (placement approximate)" : ""}`;
  return [{ text: `${count}:`, node: <Text bold>{count}:</Text> }, ...clausePieces(rest).map((p, i) => (i ? p : { ...p, sep: " " }))];
}

/** Lines above the list: the totals (as many lines as they take), the private pools (now) and the keys. */
function headLines(pm: ProcessModel | undefined, width: number, moment: TensorsMoment): number {
  if (!pm || pm.model.devices.length === 0) return 3;
  if (moment.kind !== "now") {
    const map = momentSegments(pm, moment);
    return map ? flowLines(totalsThen(pm, moment, map), width - 1) + 1 : 3;
  }
  return flowLines(totalsNow(pm), width - 1) + 2;
}

/** The keys of the list, the longest wording that fits. */
const listKeys = (width: number) => (width - 1 >= 74 ? "Enter: the selected segment's blocks (names, shapes, ages)  P: at the peak" : "Enter: a segment's blocks  P: at the peak");

/** The private pools line: always drawn, so that the list starts on the same line. */
function privatePoolsLine(pools: UnallocatedView["private_pools"]): string {
  if (pools === null) return `${PRIVATE_POOLS}: not told apart, their memory counts above (this ring's records carry no pool: recorded before the hook wrote them, or a torch whose trace has none)`;
  return poolsLine(pools) ?? `${PRIVATE_POOLS}: none`;
}

export function SegmentsScreen({ pm, width, height, ascii, selected, moment = { kind: "now" } }: { pm: ProcessModel | undefined; width: number; height: number; ascii: boolean; selected: number; moment?: TensorsMoment }) {
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  if (moment.kind !== "now") return <SegmentsThen pm={pm} width={width} height={height} ascii={ascii} selected={selected} moment={moment} />;
  const map = segments(pm.model, { withBlocks: true });
  const segs = segmentsInOrder(pm);
  const room = listRoom(height, headLines(pm, width, moment));
  const first = firstShown(segs.length, room, selected);
  const stripWidth = Math.max(10, width - 44);
  const dev = pm.model.device(map.device);
  const u = dev ? unallocatedView(pm.model, dev) : null;
  const pools = privatePoolsLine(u ? u.private_pools : null);
  return (
    <Box flexDirection="column">
      <Flow pieces={totalsNow(pm)} width={width - 1} />
      <Text dimColor>{cutWords(pools, width - 1)}</Text>
      <Text dimColor>{listKeys(width)}</Text>
      <SegmentList segs={segs} first={first} room={room} selected={selected} stripWidth={stripWidth} ascii={ascii} />
    </Box>
  );
}

function SegmentList({ segs, first, room, selected, stripWidth, ascii }: { segs: SegmentLine[]; first: number; room: number; selected: number; stripWidth: number; ascii: boolean }) {
  return (
    <>
      <Text inverse>{pad("ADDRESS", 16)}{pad("SIZE", 11, true)}{pad("USED", 6, true)}  {pad("BLOCKS (█ used, ░ free)", stripWidth)}</Text>
      {segs.slice(first, first + room).map((s, i) => {
        const used = (s.blocks ?? []).map((b) => ({ offset: b.address - s.address, size: b.size_bytes }));
        return (
          <Text key={s.address} inverse={first + i === selected}>
            {pad(`0x${s.address.toString(16)}`, 16)}{pad(formatBytes(s.size_bytes), 11, true)}{pad(`${Math.round((s.allocated_bytes / (s.size_bytes || 1)) * 100)}%`, 6, true)}  <Text color={color("green")}>{segmentStrip(s.size_bytes, used, stripWidth, ascii)}</Text>
          </Text>
        );
      })}
    </>
  );
}

/** The segments at a peak or a past step's end: the blocks alive then in the segments of then;
 *  segments released since are counted in words, not drawn (the model keeps only today's). */
function SegmentsThen({ pm, width, height, ascii, selected, moment }: { pm: ProcessModel; width: number; height: number; ascii: boolean; selected: number; moment: Exclude<TensorsMoment, { kind: "now" }> }) {
  const map = momentSegments(pm, moment);
  const what = momentWords(moment);
  if (!map) return <Text color={color("yellow")}>{`Segments at ${what}: that step's blocks are no longer kept (P: another moment, Esc: now)`}</Text>;
  const segs = segmentsInOrder(pm, moment);
  const room = listRoom(height, headLines(pm, width, moment));
  const first = firstShown(segs.length, room, selected);
  return (
    <Box flexDirection="column">
      <Flow pieces={totalsThen(pm, moment, map)} width={width - 1} color={color("yellow")} />
      <Text dimColor>{cutWords("P: another moment  [ ]: steps  Esc: now  (Enter opens a segment as it is now)", width - 1)}</Text>
      <SegmentList segs={segs} first={first} room={room} selected={selected} stripWidth={Math.max(10, width - 44)} ascii={ascii} />
    </Box>
  );
}

/** The totals at a peak or a past step's end, as pieces (see totalsNow); segments released since
 *  are counted in words. */
function totalsThen(pm: ProcessModel, moment: Exclude<TensorsMoment, { kind: "now" }>, map: NonNullable<ReturnType<typeof momentSegments>>): Piece[] {
  const head = `At ${momentWords(moment)}${moment.kind === "peak" && typeof moment.which === "string" ? ` (step ${map.step})` : ""}: ${counted(map.segments.length, "segment")}`;
  const released = map.released_since_bytes ? `; ${formatBytes(map.released_since_bytes)} of segments released since, not drawn` : "";
  const rest = `reserved ${formatBytes(map.reserved_bytes)}, allocated ${formatBytes(map.allocated_bytes)}, ${formatBytes(map.reserved_unallocated_bytes)} ${UNALLOCATED}, largest free block ${formatBytes(map.largest_free_bytes)}, ${map.n_inactive_splits} inactive splits${released}`;
  return [{ text: `${head}:`, node: <Text bold>{head}:</Text> }, ...clausePieces(rest).map((p, i) => (i ? p : { ...p, sep: " " }))];
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
      <SegmentsScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} moment={tensorsMoment(p.ui)} />
    ),
  rows: (p) => (p.ui.segment && p.pm ? segmentPartCount(p.pm, p.ui.segment.address) : segmentsInOrder(p.pm, tensorsMoment(p.ui)).length),
  rowAt: (p, line) =>
    p.ui.segment && p.pm ? segmentPartAt(p.pm, p.ui.segment.address, p.height, p.selected, line) : segmentRowAt(p.pm, p.width, p.height, tensorsMoment(p.ui), p.selected, line),
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
    const seg = segmentsInOrder(ctx.pm(ui), tensorsMoment(ui))[at];
    if (!seg) return true;
    ui.segment = { address: seg.address, listSelected: at };
    ui.selected[ui.screen] = 0; // the block list starts at its top
    return true;
  },
} as const satisfies ScreenSpec;
