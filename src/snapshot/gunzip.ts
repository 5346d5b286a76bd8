// Gzip input, bounded: a file may expand to at most EXPAND_RATIO times its size (or EXPAND_FLOOR,
// for small files), past which it is refused in words. Real snapshots and recordings expand 9 to
// 14 times (test/fixtures); a gzip bomb expands a thousand times.
//
// Every gzip input in src/ is expanded by one of the three functions below, each stopping as soon as
// its output passes the cap (zlib's maxOutputLength, or a count per streamed chunk), never after.
import { createReadStream } from "node:fs";
import { constants, createGunzip, gunzipSync } from "node:zlib";

export const EXPAND_RATIO = 64;
export const EXPAND_FLOOR = 256 * 1024 ** 2;

/** The most a gzip file of `compressed` bytes may expand to (at most `absolute`). */
export function expandCap(compressed: number, absolute = Infinity): number {
  return Math.min(absolute, Math.max(EXPAND_FLOOR, EXPAND_RATIO * compressed));
}

/** The one-line refusal of a file that expands past `cap`. */
export function expandRefusal(compressed: number, cap: number): string {
  const ratio = Math.round(cap / Math.max(1, compressed));
  return `it expands past ${Math.round(cap / 1024 ** 2)} MiB (${ratio}× its compressed size); refusing`;
}

/** The one-line words for a gzip stream that fails to expand, the same for every gzip input (a
 *  snapshot, a ring recording): a stream that ends early is said truncated (a copy or download cut
 *  short), anything else says zlib's reason. */
export function gzipProblem(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err.code === "Z_BUF_ERROR" || /unexpected end of file/i.test(err.message ?? "")) return "truncated: a gzip file that ends before its compressed data does (a copy or download cut short?)";
  return `a gzip file that does not decompress: ${err.message}`;
}

/** Thrown when the expanded stream passes its cap. */
export class ExpandError extends Error {
  override name = "ExpandError";
}

/**
 * The expanded bytes of the gzip file open at `fd` (its `compressed` bytes), chunk by chunk, never
 * more than `cap` in all. `read` says how far into the compressed file the stream is. The stream
 * owns `fd` from the first chunk asked for: it closes it, however the reading ends.
 */
export async function* gunzipChunks(fd: number, compressed: number, cap: number, chunkSize: number, read?: (bytes: number) => void): AsyncGenerator<Uint8Array> {
  const file = createReadStream("", { fd, autoClose: true, start: 0, highWaterMark: chunkSize });
  const gz = file.pipe(createGunzip({ chunkSize: 1024 * 1024 }));
  let expanded = 0;
  try {
    for await (const chunk of gz as AsyncIterable<Buffer>) {
      expanded += chunk.length;
      if (expanded > cap) throw new ExpandError(expandRefusal(compressed, cap));
      read?.(file.bytesRead);
      yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length);
    }
  } finally {
    gz.destroy();
    file.destroy();
  }
}

/** A gzip stream in memory, expanded whole: at most `cap` bytes, inflating stopped as it passes
 *  them (ExpandError, saying `refusal`); any other failure an Error in gzipProblem's words. */
export function gunzipBounded(data: Uint8Array, cap: number, refusal: string): Uint8Array {
  try {
    return gunzipSync(data, { maxOutputLength: cap });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") throw new ExpandError(refusal);
    throw new Error(gzipProblem(e));
  }
}

/** Inflating a prefix of the file never gives more than this at once. */
const HEAD_OUTPUT = 4 * 1024 ** 2;

/**
 * The first expanded bytes of a gzip stream in memory: at least `want` of them (fewer only where
 * the whole stream has fewer), at most HEAD_OUTPUT. A compressed prefix is expanded (sync-flushed:
 * what it gives so far), longer until it gives `want`; a prefix that gives more than HEAD_OUTPUT
 * (a stream that opens with empty gzip members, then a bomb) is searched down, halving, to one
 * that gives between the two: each compressed byte adds at most a few KiB.
 */
export function gunzipHead(data: Uint8Array, want: number): Uint8Array {
  const expand = (prefix: number): Uint8Array | "more" => {
    try {
      return gunzipSync(data.subarray(0, prefix), { finishFlush: constants.Z_SYNC_FLUSH, maxOutputLength: HEAD_OUTPUT });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") return "more";
      throw new Error(data[0] === 0x1f && data[1] === 0x8b ? gzipProblem(e) : `not a gzip file (${(e as Error).message})`);
    }
  };
  let short = 0; // the longest prefix known to give fewer than `want`
  let over = Infinity; // the shortest known to give more than HEAD_OUTPUT
  for (let prefix = Math.min(1024, data.length); ; ) {
    const head = expand(prefix);
    if (head === "more") over = prefix;
    else if (head.length >= want || prefix >= data.length) return head;
    else short = prefix;
    if (over - short <= 1) throw new Error(`a gzip file whose one byte expands past ${HEAD_OUTPUT} bytes: not a stream zlib writes`);
    prefix = over === Infinity ? Math.min(data.length, prefix * 4) : short + Math.floor((over - short) / 2);
  }
}
