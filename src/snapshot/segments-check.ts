// The addresses and sizes a snapshot states, checked once as it is read, before anything keys a
// map or sums bytes with them: each a whole number of bytes under 2^53 (past it a double cannot
// tell 2^60 from 2^60 + 1: two segments printed at one address, 2^64 reserved), segments of one
// device never overlapping, and each block inside its segment, apart from the others. Every
// snapshot PyTorch writes tiles its segments with its blocks (test/fixtures/snapshots all do), so
// anything else is refused in one line as hostile or corrupt, never shown as memory.

import { SnapshotError, type PickleValue } from "./pickle-contract";

type Obj = { [k: string]: PickleValue };
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);

/** What is wrong with an address or size, in words; null where it is one. */
export function badBytes(v: number): string | null {
  if (Number.isSafeInteger(v) && v >= 0) return null;
  if (v !== v) return "not a number";
  if (Math.abs(v) > Number.MAX_SAFE_INTEGER) return `${v < 0 ? "-" : ""}2^53 or more`;
  return v < 0 ? `negative (${v})` : `${v}, not a whole number`;
}

/** The refusal of `field` (where it is: "segments[3].address") holding `v`. */
export function bytesRefusal(field: string, v: number): string {
  return `${field} is ${badBytes(v)}: an address or size is a whole number of bytes under 2^53; refused as hostile or corrupt`;
}

/** `o[key]` where it is a number (checked); undefined where it is absent or not a number (the
 *  summary counts those as 0, as it always has). */
function bytesAt(o: Obj, key: string, where: string): number | undefined {
  const v = o[key];
  if (typeof v !== "number") return undefined;
  if (badBytes(v) !== null) throw new SnapshotError(bytesRefusal(`${where}.${key}`, v));
  return v;
}

const hex = (n: number) => `0x${n.toString(16)}`;
const range = (start: number, size: number) => `[${hex(start)}, ${hex(start + size)})`;

interface Span {
  start: number;
  size: number;
  name: string;
}

/** Spans sorted by start: the first two that overlap, named, in words; null where none do. */
function overlap(spans: Span[], what: string): string | null {
  spans.sort((a, b) => a.start - b.start);
  for (let k = 1; k < spans.length; k++) {
    const a = spans[k - 1]!;
    const b = spans[k]!;
    if (b.start < a.start + a.size) return `${a.name} ${range(a.start, a.size)} and ${b.name} ${range(b.start, b.size)} overlap${what}; refused as hostile or corrupt`;
  }
  return null;
}

/** A segment's blocks: each inside the segment, none overlapping another. */
function checkBlocks(seg: Obj, i: number, start: number | undefined, size: number | undefined): void {
  if (!Array.isArray(seg.blocks)) return;
  const spans: Span[] = [];
  seg.blocks.forEach((b, k) => {
    if (!isObj(b)) return;
    const where = `segments[${i}].blocks[${k}]`;
    const address = bytesAt(b, "address", where);
    const bytes = bytesAt(b, "size", where);
    bytesAt(b, "requested_size", where);
    if (address === undefined || bytes === undefined) return;
    if (start !== undefined && size !== undefined && (address < start || address + bytes > start + size)) {
      throw new SnapshotError(`${where} ${range(address, bytes)} lies outside its segment ${range(start, size)}; refused as hostile or corrupt`);
    }
    spans.push({ start: address, size: bytes, name: where });
  });
  const said = overlap(spans, "");
  if (said) throw new SnapshotError(said);
}

/** The snapshot's `segments` (a list, or anything the summary refuses later), checked. */
export function checkSegments(segments: PickleValue | undefined): void {
  if (!Array.isArray(segments)) return;
  const byDevice = new Map<number, Span[]>();
  segments.forEach((seg, i) => {
    if (!isObj(seg)) return;
    const where = `segments[${i}]`;
    const start = bytesAt(seg, "address", where);
    const size = bytesAt(seg, "total_size", where);
    for (const key of ["allocated_size", "active_size", "requested_size"]) bytesAt(seg, key, where);
    checkBlocks(seg, i, start, size);
    if (start === undefined || size === undefined) return;
    const device = typeof seg.device === "number" ? seg.device : 0;
    (byDevice.get(device) ?? byDevice.set(device, []).get(device)!).push({ start, size, name: where });
  });
  for (const [device, spans] of byDevice) {
    const said = overlap(spans, ` on device ${device}`);
    if (said) throw new SnapshotError(said);
  }
}
