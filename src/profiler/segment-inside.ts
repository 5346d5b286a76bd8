// One segment from the inside: its blocks in address order with the free ranges between them, as
// memory_viz shows a segment (sizes, names, shapes, ages). Pure: a query over the model.
import type { ProfilerModel } from "./model";
import { blocks, type BlockLine } from "./queries";
import { segments } from "./queries";

export type SegmentPart = { kind: "block"; offset_bytes: number; block: BlockLine } | { kind: "free"; offset_bytes: number; size_bytes: number };

export interface SegmentInside {
  address: number;
  size_bytes: number;
  allocated_bytes: number;
  parts: SegmentPart[];
}

/** The segment at `address` of a device, or null where there is none (freed since). */
export function segmentInside(m: ProfilerModel, opts: { device?: number; address: number }): SegmentInside | null {
  const seg = segments(m, { device: opts.device }).segments.find((s) => s.address === opts.address);
  if (!seg) return null;
  const end = seg.address + seg.size_bytes;
  const inside = blocks(m, { device: opts.device, sort: "address", limit: Infinity }).blocks.filter((b) => b.address >= seg.address && b.address < end);
  const parts: SegmentPart[] = [];
  let at = seg.address;
  for (const b of inside) {
    if (b.address > at) parts.push({ kind: "free", offset_bytes: at - seg.address, size_bytes: b.address - at });
    parts.push({ kind: "block", offset_bytes: b.address - seg.address, block: b });
    at = Math.max(at, b.address + b.size_bytes);
  }
  if (at < end) parts.push({ kind: "free", offset_bytes: at - seg.address, size_bytes: end - at });
  return { address: seg.address, size_bytes: seg.size_bytes, allocated_bytes: seg.allocated_bytes, parts };
}
