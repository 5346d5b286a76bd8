// The allocator event as it leaves src/ffi: a columnar batch of plain numbers, and the codes its
// columns carry. Mirrors gpumem_record in cuda/gpumem_ring.h (the one definition of the layout);
// the codes come from ./wire.ts, generated from that header. Columns, not objects: the model
// ingests millions of events a second, and a typed-array column costs nothing to allocate or walk.
import * as wire from "./wire";

export { ACTION, ACTION_NAMES, MAX_DEVICES, MODE_NAMES, PHASE, PHASE_NAMES } from "./wire";

/** GPUMEM_RING_MAGIC as its bytes lie at the start of a ring file: how a recording is told apart. */
export const RING_MAGIC = (() => {
  const bytes = new DataView(new ArrayBuffer(8));
  bytes.setBigUint64(0, wire.RING_MAGIC, true);
  return new TextDecoder("latin1").decode(bytes);
})();

/** A sync record's `extra` when an allocator event raced the read (GPUMEM_SYNC_UNSURE) as the
 *  float64 column holds it: 2^64 − 1 rounds to 2^64. */
export const SYNC_UNSURE = Number(wire.SYNC_UNSURE);

export type ActionName = keyof typeof wire.ACTION;
export type PhaseName = (typeof wire.PHASE_NAMES)[number];

/** Records from FIRST_MARK on are marks (phase, step, range, sync): no block, no allocator event. */
export function isMark(action: number): boolean {
  return action >= wire.FIRST_MARK;
}

/**
 * A batch of events. Each column has room for `capacity` events; the first `count` are valid.
 * Addresses, sizes and streams are exact as doubles (below 2^53 on every GPU we know).
 */
export interface EventBatch {
  count: number;
  /** Unix time in microseconds (from the allocator's clock through the ring's calibration). */
  time_us: Float64Array;
  action: Uint8Array;
  device: Int8Array;
  phase: Uint8Array;
  address: Float64Array;
  /** Bytes; for `oom` the requested size. */
  size: Float64Array;
  stream: Float64Array;
  /** For `oom`: bytes free on the device. */
  extra: Float64Array;
  step: Uint32Array;
  /** Range id (see the manifest's `ranges`); 0 = none. */
  range: Uint32Array;
  /** Line id of the line profiler (see the manifest's `lines`); 0 = none. */
  line: Uint32Array;
  /** An alloc's stack id in its source's stack table (a snapshot's frames: model.stacks resolves
   *  it); 0 = none. A ring's records carry no stack yet: its readers leave the column zero. */
  stack: Uint32Array;
}

export function newEventBatch(capacity: number): EventBatch {
  return {
    count: 0,
    time_us: new Float64Array(capacity),
    action: new Uint8Array(capacity),
    device: new Int8Array(capacity),
    phase: new Uint8Array(capacity),
    address: new Float64Array(capacity),
    size: new Float64Array(capacity),
    stream: new Float64Array(capacity),
    extra: new Float64Array(capacity),
    step: new Uint32Array(capacity),
    range: new Uint32Array(capacity),
    line: new Uint32Array(capacity),
    stack: new Uint32Array(capacity),
  };
}

/** Running totals of one device, from the ring header (exact even when records are lost): the
 *  fields of gpumem_totals (see TOTALS_OFFSET in ./wire.ts for what each means). */
export type DeviceTotals = { device: number } & { [K in (typeof wire.TOTALS_FIELDS)[number]]: number };

export type HookMode = (typeof wire.MODE_NAMES)[number];

/** The ring header's state at one read. */
export interface RingHeader {
  abi_version: number;
  capacity: number;
  pid: number;
  mode: HookMode;
  n_devices: number;
  attach_unix_us: number;
  updated_unix_us: number;
  current_step: number;
  current_range: number;
  /** The line profiler's current line id (0 = none). */
  current_line: number;
  current_phase: number;
  closed: boolean;
  /** Records written, every lane of the ring together (a reader's next() counts records consumed the
   *  same way): one position for the whole stream, whatever the lanes. */
  write_index: number;
  totals: DeviceTotals[];
}
