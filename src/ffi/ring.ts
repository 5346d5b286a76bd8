// The event ring's reader (cuda/ring_*.c) through bun:ffi: one FFI call copies a whole batch of
// records into an EventBatch's columns, and one the header into a private buffer. A live ring is
// the agent's file mapped shared: the native reader guards every read of it, so a file cut short
// under the monitor (its owner truncating or rewriting it) is a RingError, not a SIGBUS. A recording
// is read into private memory instead (`copy`, or openRingBuffer for a decompressed one): nothing
// can change it under the reader.
import { dlopen, FFIType, ptr, type Pointer } from "bun:ffi";
import type { DeviceTotals, EventBatch, RingHeader } from "./events";
import { libraryPath } from "./lib";
import { HEADER_OFFSET as H, HEADER_SIZE, LANE_OFFSET, LANE_SIZEOF, MAX_DEVICES, MODE_NAMES, TOTALS_FIELDS, TOTALS_OFFSET, TOTALS_SIZEOF } from "./wire";

export type RingErrorKind = "open" | "truncated" | "format" | "version";
const KINDS: Record<number, RingErrorKind> = { [-1]: "open", [-2]: "truncated", [-3]: "format", [-4]: "version" };

export class RingError extends Error {
  override name = "RingError";
  constructor(
    message: string,
    readonly kind: RingErrorKind,
  ) {
    super(message);
  }
}

const symbols = {
  gpumem_ring_open: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  gpumem_ring_open_buffer: { args: [FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  gpumem_ring_close: { args: [FFIType.ptr], returns: FFIType.void },
  gpumem_ring_header_copy: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  gpumem_ring_next: { args: [FFIType.ptr], returns: FFIType.u64_fast },
  gpumem_ring_lanes: { args: [FFIType.ptr], returns: FFIType.u32 },
  gpumem_ring_read_until: {
    args: [
      FFIType.ptr, FFIType.u32, FFIType.u64, FFIType.i32,
      FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr,
      FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr,
    ],
    returns: FFIType.i64_fast,
  },
} as const;

/** gpumem_ring_read_until's `until` for "no stop". */
const NO_STOP = 0xffff_ffff_ffff_ffffn;
/** gpumem_ring_open's flag: read the file into private memory (cuda/ring.h). */
const RING_COPY = 1;

/** What a failed read or header copy means (cuda/ring.h), said of the ring at `path`. */
function readError(path: string, rc: number): RingError {
  if (rc === -2) return new RingError(`ring ${path} was cut short while being read (its file shrank): it is no longer readable`, "truncated");
  return new RingError(`ring ${path}: its header changed to values out of range (a clock calibration that is not finite, or a write index past what the file holds)`, "format");
}

let lib: ReturnType<typeof dlopen<typeof symbols>>["symbols"] | null = null;
function native() {
  return (lib ??= dlopen(libraryPath(), symbols).symbols);
}

export interface ReadResult {
  /** Records copied into the batch (also batch.count). */
  count: number;
  /** Records this read skipped because the writer lapped the reader. */
  lost: number;
}

export interface RingReader {
  readonly path: string;
  header(): RingHeader;
  /** Copy new records (at most the batch's capacity) into `batch`, stopping at stream position
   *  `until` (see next()). A reader opened with `fold` returns each free_requested that its
   *  free_completed follows at once as one ACTION.free record: count is then below what the read
   *  consumed, and next() is the position. */
  read(batch: EventBatch, until?: number): ReadResult;
  /** Records consumed (read or counted lost), every lane together: the position to compare with
   *  the header's `write_index` (records written, every lane together). */
  next(): number;
  close(): void;
}

class NativeRingReader implements RingReader {
  private handle: Pointer | null;
  private readonly bytes = new Uint8Array(HEADER_SIZE);
  private readonly view = new DataView(this.bytes.buffer);
  private readonly lost = new BigUint64Array(1);
  /** Byte offsets of each lane's write index in the header (lane 0's, then the devices'). */
  private readonly writeIndexAt: number[];

  constructor(
    readonly path: string,
    handle: Pointer,
    private readonly fold: boolean,
  ) {
    this.handle = handle;
    const lanes = native().gpumem_ring_lanes(handle);
    this.writeIndexAt = [H.write_index];
    for (let d = 0; d + 1 < lanes; d++) this.writeIndexAt.push(H.lanes + d * LANE_SIZEOF + LANE_OFFSET.write_index);
  }

  header(): RingHeader {
    this.alive();
    const rc = native().gpumem_ring_header_copy(this.handle!, ptr(this.bytes));
    if (rc !== 0) throw readError(this.path, rc);
    const v = this.view;
    const u64 = (o: number) => Number(v.getBigUint64(o, true));
    const i64 = (o: number) => Number(v.getBigInt64(o, true));
    const nDevices = Math.min(v.getUint32(H.n_devices, true), MAX_DEVICES);
    const totals: DeviceTotals[] = [];
    for (let d = 0; d < nDevices; d++) {
      const base = H.totals + d * TOTALS_SIZEOF;
      const t = { device: d } as DeviceTotals;
      for (const name of TOTALS_FIELDS) t[name] = i64(base + TOTALS_OFFSET[name]);
      totals.push(t);
    }
    return {
      abi_version: v.getUint32(H.abi_version, true),
      capacity: u64(H.capacity),
      pid: v.getInt32(H.pid, true),
      mode: MODE_NAMES[v.getUint32(H.mode, true)] ?? "none",
      n_devices: nDevices,
      attach_unix_us: u64(H.attach_ns) / 1000,
      updated_unix_us: u64(H.updated_ns) / 1000,
      current_step: v.getUint32(H.cur_step, true),
      current_range: v.getUint32(H.cur_range, true),
      current_phase: v.getUint8(H.cur_phase),
      current_line: v.getUint32(H.cur_line, true),
      closed: v.getUint8(H.closed) === 1,
      // Records written, summed over the lanes: next() counts records consumed the same way, so the
      // two compare as they did with one lane.
      write_index: this.writeIndexAt.reduce((sum, at) => sum + u64(at), 0),
      totals,
    };
  }

  read(batch: EventBatch, until = Infinity): ReadResult {
    this.alive();
    const capacity = batch.action.length;
    // One entry for every read: with no stop and no fold it is gpumem_ring_read itself.
    const n = native().gpumem_ring_read_until(
      this.handle!, capacity, until === Infinity ? NO_STOP : BigInt(Math.max(0, Math.floor(until))), this.fold ? 1 : 0,
      ptr(batch.time_us), ptr(batch.action), ptr(batch.device), ptr(batch.phase), ptr(batch.address),
      ptr(batch.size), ptr(batch.stream), ptr(batch.extra), ptr(batch.step), ptr(batch.range), ptr(batch.line), ptr(this.lost),
    );
    if (n < 0) throw readError(this.path, Number(n));
    batch.count = Number(n);
    return { count: batch.count, lost: Number(this.lost[0]) };
  }

  next(): number {
    this.alive();
    return Number(native().gpumem_ring_next(this.handle!));
  }

  close(): void {
    if (!this.handle) return;
    native().gpumem_ring_close(this.handle);
    this.handle = null;
  }

  private alive(): void {
    if (!this.handle) throw new RingError(`ring ${this.path} is closed`, "open");
  }
}

function opened(path: string, rc: number, out: BigUint64Array, err: Uint8Array, fold: boolean): RingReader {
  if (rc !== 0) {
    const end = err.indexOf(0);
    throw new RingError(new TextDecoder().decode(err.subarray(0, end < 0 ? err.length : end)), KINDS[rc] ?? "format");
  }
  return new NativeRingReader(path, Number(out[0]) as Pointer, fold);
}

/** Open a ring file. `fold`: reads return free pairs as one ACTION.free record (what a model
 *  needs, a third fewer records); without it every record comes as the writer wrote it. `copy`: a
 *  recording, read into private memory (its holes cost nothing); without it the file is mapped
 *  shared, as a live ring's reader must. Throws RingError with a message a user can act on. */
export function openRing(path: string, opts: { fold?: boolean; copy?: boolean } = {}): RingReader {
  const out = new BigUint64Array(1);
  const err = new Uint8Array(512);
  const rc = native().gpumem_ring_open(Buffer.from(`${path}\0`), opts.copy ? RING_COPY : 0, ptr(out), ptr(err), err.length);
  return opened(path, rc, out, err, opts.fold ?? false);
}

/** A ring held in memory (a decompressed recording), named `path` in messages: copied and
 *  validated as openRing does; `bytes` can go once this returns. */
export function openRingBuffer(bytes: Uint8Array, path: string, opts: { fold?: boolean } = {}): RingReader {
  const out = new BigUint64Array(1);
  const err = new Uint8Array(512);
  const data = bytes.length > 0 ? bytes : new Uint8Array(1);
  const rc = native().gpumem_ring_open_buffer(ptr(data), BigInt(bytes.length), Buffer.from(`${path}\0`), ptr(out), ptr(err), err.length);
  return opened(path, rc, out, err, opts.fold ?? false);
}
