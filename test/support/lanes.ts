// Ring files of several lanes written field by field from the generated offsets (src/ffi/wire.ts),
// so a test states exactly what each lane holds: its records, its write index, a slot claimed and
// not yet published. The reader under test is the real libgpumem.
import { closeSync, openSync, writeFileSync, writeSync } from "node:fs";
import { HEADER_OFFSET as H, HEADER_SIZE, LANE_OFFSET, LANE_SIZEOF, MODE, RECORD_OFFSET as R, RECORD_SIZE, RING_ABI_VERSION, RING_MAGIC } from "../../src/ffi/wire";

/** One record of a lane; `seq` defaults to its index + 1 (published), 0 means claimed, unpublished. */
export interface LaneRecord {
  time: number;
  action: number;
  device?: number;
  address?: number;
  size?: number;
  step?: number;
  seq?: number;
}

export interface LaneRing {
  capacity: number;
  /** Records of lane 0 (shared), lane 1 (device 0), …, each in index order; later ones overwrite
   *  earlier ones in their slot, as a lapping writer does. */
  lanes: LaneRecord[][];
  /** The header's n_lanes (default: lanes.length) and ABI (default: the current one). */
  nLanes?: number;
  abi?: number;
  /** The file's size in lanes of records (default: lanes.length): less makes a short file. */
  sizedFor?: number;
}

/** Where lane `lane`'s write index lies in the header. */
export function writeIndexOffset(lane: number): number {
  return lane === 0 ? H.write_index : H.lanes + (lane - 1) * LANE_SIZEOF + LANE_OFFSET.write_index;
}

/** Where record `index` of lane `lane` lies in the file. */
export function recordOffset(capacity: number, lane: number, index: number): number {
  return HEADER_SIZE + (lane * capacity + (index & (capacity - 1))) * RECORD_SIZE;
}

export function writeLaneRing(path: string, ring: LaneRing): void {
  const { capacity, lanes } = ring;
  const buf = Buffer.alloc(HEADER_SIZE + (ring.sizedFor ?? lanes.length) * capacity * RECORD_SIZE);
  buf.writeBigUInt64LE(RING_MAGIC, H.magic);
  buf.writeUInt32LE(ring.abi ?? RING_ABI_VERSION, H.abi_version);
  buf.writeUInt32LE(HEADER_SIZE, H.header_size);
  buf.writeUInt32LE(RECORD_SIZE, H.record_size);
  buf.writeUInt32LE(Math.max(0, lanes.length - 1), H.n_devices);
  buf.writeBigUInt64LE(BigInt(capacity), H.capacity);
  buf.writeUInt32LE(MODE.hook, H.mode);
  buf.writeUInt32LE(ring.nLanes ?? lanes.length, H.n_lanes);
  lanes.forEach((recs, lane) => {
    buf.writeBigUInt64LE(BigInt(recs.length), writeIndexOffset(lane));
    recs.forEach((r, i) => {
      const o = recordOffset(capacity, lane, i);
      if (o + RECORD_SIZE > buf.length) return;
      buf.writeBigUInt64LE(BigInt(r.seq ?? i + 1), o + R.seq);
      buf.writeBigUInt64LE(BigInt(r.time), o + R.time); // unix ns: clock_ns_per_tick is 0
      buf.writeBigUInt64LE(BigInt(r.address ?? 0), o + R.address);
      buf.writeBigUInt64LE(BigInt(r.size ?? 0), o + R.size);
      buf.writeUInt32LE(r.step ?? 0, o + R.step);
      buf.writeUInt8(r.action, o + R.action);
      buf.writeInt8(r.device ?? -1, o + R.device);
    });
  });
  writeFileSync(path, buf);
}

/** Publish a claimed record in place (the mapped file changes under the reader, as with the hook). */
export function publish(path: string, capacity: number, lane: number, index: number): void {
  const seq = Buffer.alloc(8);
  seq.writeBigUInt64LE(BigInt(index + 1));
  const fd = openSync(path, "r+");
  try {
    writeSync(fd, seq, 0, 8, recordOffset(capacity, lane, index) + R.seq);
  } finally {
    closeSync(fd);
  }
}
