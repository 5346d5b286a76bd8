// Gzip input, bounded: a file may expand to at most EXPAND_RATIO times its size (or EXPAND_FLOOR,
// for small files), past which it is refused in words. Real snapshots and recordings expand 9 to
// 14 times (test/fixtures); a gzip bomb expands a thousand times.
import { createReadStream } from "node:fs";
import { createGunzip } from "node:zlib";

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
