// The allocator event as it leaves src/ffi: a columnar batch of plain numbers.
// Mirrors gpumem_record in cuda/gpumem_ring.h (the one definition of the layout).
// Columns, not objects: the model ingests millions of events a second, and a typed-array
// column costs nothing to allocate or to walk.

/** GPUMEM_RING_MAGIC as its bytes lie at the start of a ring file: how a recording is told apart. */
export const RING_MAGIC = "PGMPRNG1";

/** Action codes, indexed by the record's `action` byte (PyTorch's TraceEntry order, then marks). */
export const ACTION = {
  alloc: 0,
  free_requested: 1,
  free_completed: 2,
  segment_alloc: 3,
  segment_free: 4,
  segment_map: 5,
  segment_unmap: 6,
  snapshot: 7,
  oom: 8,
  phase: 16,
  step: 17,
  range_enter: 18,
  range_exit: 19,
  /** torch's own figures of one device at this point of the stream (gpumem_ring.h GPUMEM_ACTION_SYNC). */
  sync: 20,
} as const;

/** A sync record's `extra` when an allocator event raced the read (GPUMEM_SYNC_UNSURE, 2^64 − 1 as a double). */
export const SYNC_UNSURE = 2 ** 64;
export type ActionName = keyof typeof ACTION;

export const ACTION_NAMES: Record<number, ActionName> = Object.fromEntries(
  Object.entries(ACTION).map(([name, code]) => [code, name as ActionName]),
);

/** Phase codes, indexed by the record's `phase` byte. */
export const PHASES = ["other", "forward", "backward", "optimizer"] as const;
export type PhaseName = (typeof PHASES)[number];

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
  };
}

/** Running totals of one device, from the ring header (exact even when records are lost). */
export interface DeviceTotals {
  device: number;
  allocated: number;
  reserved: number;
  active: number;
  peak_allocated: number;
  peak_reserved: number;
  peak_active: number;
  n_alloc: number;
  n_free: number;
  n_segment_alloc: number;
  n_segment_free: number;
  n_oom: number;
  n_retries: number;
  /** Live bytes as requested by the program (the trace's sizes): torch's requested_bytes. */
  requested: number;
}

export type HookMode = "none" | "hook" | "polling";
export const HOOK_MODES: HookMode[] = ["none", "hook", "polling"];

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
  write_index: number;
  totals: DeviceTotals[];
}
