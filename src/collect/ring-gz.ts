// A gzip'd ring recording (`x.ring.gz`, the demo's: records compress ~14×) into memory, bounded:
// its first expanded bytes must be a ring's magic and header before more is expanded, it may not
// expand past what its header promises, and that may not pass the gzip cap (src/snapshot/gunzip.ts).
// Nothing is written to disk, so nothing is left behind on an error or a signal.
import { closeSync, readSync } from "node:fs";
import { RING_MAGIC } from "../ffi/events";
import { HEADER_OFFSET, HEADER_SIZE, RECORD_SIZE } from "../ffi/wire";
import { expandCap, expandRefusal, gunzipBounded, gunzipHead } from "../snapshot/gunzip";
import { openRegular } from "../snapshot/input-file";

/** The ring's bytes, decompressed; a one-line Error (naming `path`) for anything else. */
export function readRingGz(path: string): Uint8Array {
  const { fd, size } = openRegular(path, "recording");
  let data: Uint8Array;
  try {
    data = new Uint8Array(size);
    for (let got = 0; got < size; ) {
      const k = readSync(fd, data, got, size - got, got);
      if (k === 0) throw new Error(`${path}: it shrank while being read`);
      got += k;
    }
  } finally {
    closeSync(fd);
  }
  try {
    const head = gunzipHead(data, HEADER_SIZE);
    if (head.length < 8 || new TextDecoder("latin1").decode(head.subarray(0, 8)) !== RING_MAGIC) {
      throw new Error("not a gpumem-tui ring recording (its first bytes are not the ring magic)");
    }
    if (head.length < HEADER_SIZE) throw new Error(`truncated: ${head.length} bytes, smaller than a ring's ${HEADER_SIZE}-byte header`);
    const v = new DataView(head.buffer, head.byteOffset, head.byteLength);
    // What the header promises (the native reader checks the rest once the ring is whole).
    const lanes = v.getUint32(HEADER_OFFSET.abi_version, true) >= 2 ? Math.max(1, v.getUint32(HEADER_OFFSET.n_lanes, true)) : 1;
    const promised = HEADER_SIZE + lanes * Number(v.getBigUint64(HEADER_OFFSET.capacity, true)) * RECORD_SIZE;
    const cap = expandCap(size);
    if (promised > cap) throw new Error(`its header promises ${promised} bytes: ${expandRefusal(size, cap)}`);
    const ring = gunzipBounded(data, promised, `it expands past the ${promised} bytes its header promises; refusing`);
    return ring;
  } catch (e) {
    throw new Error(`${path}: ${(e as Error).message}`);
  }
}
