// Reading a snapshot file piece by piece: the file (or its gzip stream) goes through the pickle
// machine in chunks, trace entries straight into columns, so neither the file nor an object tree
// of its trace is ever in memory whole. What is left as a tree is small: segments, annotations,
// allocator settings.

import { closeSync, readSync } from "node:fs";
import { RING_MAGIC } from "../ffi/events";
import { ExpandError, expandCap, expandRefusal, gunzipBounded, gunzipChunks, gzipProblem } from "./gunzip";
import { openRegular, readHead } from "./input-file";
import { pickleMachine, SnapshotError, type PickleMachine, type PickleValue } from "./pickle";
import { objectLimits } from "./pickle-contract";
import { checkSegments } from "./segments-check";
import { TraceColumns } from "./trace-columns";

/** Files above this are refused before reading (a snapshot of 16 GB is not one `max_entries` makes). */
export const MAX_SNAPSHOT_BYTES = 16 * 1024 ** 3;
/** A gzip file may expand to at most this, whatever its size (and to at most expandCap of it). */
export const MAX_EXPANDED_BYTES = 32 * 1024 ** 3;
const CHUNK = 4 * 1024 ** 2;

/** A snapshot as read: its dict without the trace entries (device_traces' lists are empty), and the trace. */
export interface ParsedSnapshot {
  root: { [key: string]: PickleValue };
  trace: TraceColumns;
}

/** Called as the file is read: bytes of the file done so far, and its size. */
export type Progress = (done: number, total: number) => void;

const GZIP = [0x1f, 0x8b];
const ZSTD = [0x28, 0xb5, 0x2f, 0xfd];
const startsWith = (d: Uint8Array, magic: number[]) => magic.every((b, i) => d[i] === b);

/** The first bytes say what a file is: a pickle (protocol 2 or later), gzip, or something named. */
function kind(head: Uint8Array): "pickle" | "gzip" {
  if (startsWith(head, GZIP)) return "gzip";
  if (startsWith(head, ZSTD)) throw new SnapshotError("a zstd-compressed file: decompress it first (zstd -d FILE)");
  if (head[0] !== 0x80) throw new SnapshotError("not a PyTorch memory snapshot: not a pickle (protocol 2 or later) and not gzip");
  return "pickle";
}

function finish(value: PickleValue | undefined, trace: TraceColumns): ParsedSnapshot {
  if (value === null || typeof value !== "object" || Array.isArray(value) || value instanceof Uint8Array || !Array.isArray(value.segments)) {
    throw new SnapshotError("not a PyTorch memory snapshot: no `segments` list (a pickle of something else)");
  }
  checkSegments(value.segments);
  trace.assignDevices(value.device_traces);
  return { root: value, trace };
}

/** A snapshot in memory (tests, small files): the same machine, one chunk. */
export function parseSnapshotBytes(data: Uint8Array): ParsedSnapshot {
  let bytes = data;
  if (kind(data) === "gzip") {
    const cap = expandCap(data.length, MAX_EXPANDED_BYTES);
    try {
      bytes = gunzipBounded(data, cap, expandRefusal(data.length, cap));
    } catch (e) {
      throw new SnapshotError((e as Error).message);
    }
  }
  const trace = new TraceColumns();
  return finish(pickleMachine(objectLimits(data.length), trace).feed(bytes, true), trace);
}

/**
 * The trace entries' objects are garbage as soon as their batch is read: collected every 4 MiB of
 * input, the heap stays near what is kept (columns, the memo's codes) instead of growing with the
 * file (every 16 MiB, a file of 1.5 million entries with frames peaked at 1.3 times its size; at
 * 4 MiB, 0.95 times, for 5% more time). Returns the bytes since the last collection.
 */
function collect(bytes: number): number {
  if (bytes < 4 * 1024 ** 2) return bytes;
  Bun.gc(true);
  return 0;
}

/** Plain pickle: read in chunks into two buffers in turn (the machine keeps only the latest). */
function feedPlain(fd: number, m: PickleMachine, size: number, progress?: Progress): PickleValue | undefined {
  const bufs = [new Uint8Array(Math.min(CHUNK, Math.max(1, size))), new Uint8Array(Math.min(CHUNK, Math.max(1, size)))];
  let done = 0;
  let k = 0;
  let sinceGc = 0;
  for (;;) {
    const buf = bufs[k]!;
    k ^= 1;
    const got = readSync(fd, buf, 0, buf.length, done);
    done += got;
    const last = got === 0 || done >= size;
    const v = m.feed(buf.subarray(0, got), last);
    progress?.(done, size);
    sinceGc = collect(sinceGc + got);
    if (v !== undefined || last) return v;
  }
}

async function feedGzip(fd: number, m: PickleMachine, size: number, progress?: Progress): Promise<PickleValue | undefined> {
  const cap = expandCap(size, MAX_EXPANDED_BYTES);
  let sinceGc = 0;
  let value: PickleValue | undefined;
  try {
    for await (const chunk of gunzipChunks(fd, size, cap, CHUNK, (read) => progress?.(read, size))) {
      // After STOP the stream is still read to its end: a cut or damaged gzip trailer is an error too.
      if (value === undefined) value = m.feed(chunk, false);
      sinceGc = collect(sinceGc + chunk.length);
    }
  } catch (e) {
    if (e instanceof SnapshotError) throw e;
    if (e instanceof ExpandError) throw new SnapshotError(e.message);
    throw new SnapshotError(gzipProblem(e));
  }
  return value ?? m.feed(new Uint8Array(0), true);
}

/** Read a snapshot file (pickle protocol 2 to 5, optionally gzip) without holding it whole. */
export async function readSnapshotFile(path: string, progress?: Progress): Promise<ParsedSnapshot> {
  const { fd, size } = openRegular(path, "snapshot");
  const trace = new TraceColumns();
  // Objects bounded by the bytes on disk (compressed, for gzip): pickle-contract.ts says why.
  const m = pickleMachine(objectLimits(size), trace);
  let open = true;
  try {
    if (size > MAX_SNAPSHOT_BYTES) throw new SnapshotError(`${path} is ${size} bytes: larger than the ${MAX_SNAPSHOT_BYTES}-byte limit`);
    const head = readHead(fd, 8);
    if (new TextDecoder("latin1").decode(head) === RING_MAGIC) {
      throw new SnapshotError(`${path} is a gpumem-tui ring recording, not a snapshot: \`gpumem-tui replay ${path}\` plays it, and with \`--snapshot OUT\` writes one`);
    }
    const gzip = kind(head) === "gzip";
    open = !gzip; // the gzip stream closes the file itself
    const value = gzip ? await feedGzip(fd, m, size, progress) : feedPlain(fd, m, size, progress);
    progress?.(size, size);
    Bun.gc(true); // what the reading left goes before the trace is played, not after
    return finish(value, trace);
  } catch (e) {
    if (e instanceof SnapshotError && !e.message.startsWith(path)) throw new SnapshotError(`${path}: ${e.message}`);
    throw e;
  } finally {
    if (open) closeSync(fd);
  }
}
