// The native core of the model's ingest (cuda/ingest_core.c) through bun:ffi: one call takes a
// stretch of allocator records over the model's own typed arrays (src/profiler/device-core.ts
// hands it their addresses). Loaded from the library the monitor already loads, on the first
// stretch; where that library is not built or cannot be loaded, or GPUMEM_NATIVE_CORE=0 says so,
// there is none and the model's flat TypeScript loop (DeviceState.allocatorRecords) does the same
// work: `ingestCoreStatus()` says which, and why, for the one line the monitor shows.
import { dlopen, FFIType, ptr, type Pointer } from "bun:ffi";
import { findLibrary } from "./locate";

const symbols = {
  gpumem_ingest_run: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i64_fast },
} as const;

/** How stretches are taken: every one natively ("1"), none ("0"), or natively from a length on. */
export type CoreMode = "native" | "ts" | "auto";

export interface IngestCore {
  /** gpumem_ingest_run(columns, state): the first record not taken, −1 where none could be read. */
  run(columns: Pointer, state: Pointer): number;
  /** Where a device's stretches are shorter than this on average, the TypeScript loop takes them (0: never). */
  minStretch: number;
}

/** Where a device's stretches have had fewer records than this lately (a moving average over some
 *  16), the FFI call and the copy of the state around it (about 350 ns a call here) cost more than
 *  the core saves, and the TypeScript loop takes them: on this 2-core machine rings of 5 to 7
 *  records a stretch (those that mark every sync point) went 6 to 10% slower through the core, one
 *  of 14 about as fast, one of 25 a fifth faster (bench/results/ingest-native). */
export const AUTO_MIN_STRETCH = 16;

let loaded: IngestCore | null | undefined;
let why: string | null = null;

/** GPUMEM_NATIVE_CORE: 0 (the TypeScript loop), 1 (the native core for every stretch), unset: auto. */
export function coreMode(): CoreMode {
  const v = process.env.GPUMEM_NATIVE_CORE;
  return v === "0" ? "ts" : v === "1" ? "native" : "auto";
}

function load(): IngestCore | null {
  if (loaded !== undefined) return loaded;
  // The library as it is, never built here: a build (seconds of a compiler) in the middle of a
  // replay's first records is not the core's to start; the ring reader builds it where it must.
  const found = findLibrary();
  if (!("path" in found)) {
    why = `the native ingest core is not loaded (${found.error}): the model's TypeScript loop takes every record`;
    return (loaded = null);
  }
  try {
    const lib = dlopen(found.path, symbols).symbols;
    const run = lib.gpumem_ingest_run as unknown as (c: Pointer, s: Pointer) => number;
    loaded = { run, minStretch: AUTO_MIN_STRETCH };
  } catch (e) {
    why = `the native ingest core is not loaded (${String((e as Error).message ?? e).split("\n")[0]}): the model's TypeScript loop takes every record`;
    loaded = null;
  }
  return loaded;
}

/** The core for a new device's state, as GPUMEM_NATIVE_CORE says (read each time: tests and
 *  benchmarks switch it between models); null: the TypeScript loop. */
export function ingestCore(): IngestCore | null {
  const mode = coreMode();
  if (mode === "ts") return null;
  const core = load();
  if (core === null) return null;
  return mode === "native" ? { run: core.run, minStretch: 0 } : core;
}

/** Whether the native core was loaded, and where it was asked for and could not be, why (the one
 *  line the monitor's document carries among its warnings: src/collect/machine.ts). Null: it
 *  runs, it was never asked for (no allocator records yet), or GPUMEM_NATIVE_CORE=0 chose the loop. */
export function ingestCoreStatus(): { native: boolean; why: string | null } {
  if (loaded === undefined) return { native: false, why: null };
  return { native: loaded !== null, why };
}

/** The address of an array's first element, for the core's table (0 for an empty one). The array
 *  must stay referenced while the address is in use (device-core.ts holds them). A small typed
 *  array keeps its elements inside the JavaScript heap until something asks for its ArrayBuffer
 *  (a subarray, .buffer), which moves them into one of their own: the table would then point at
 *  memory the array has left. Asking for the buffer first moves them now, for good. */
export function addressOf(a: Float64Array | Int32Array | Uint32Array | Uint8Array | Int8Array | BigUint64Array): bigint {
  if (a.byteLength === 0 || a.buffer.byteLength < a.byteOffset + a.byteLength) return 0n;
  return BigInt(ptr(a));
}

/** The address of an array the caller keeps for good (its state block and table; see addressOf). */
export function pointerOf(a: Float64Array | BigUint64Array): Pointer {
  if (a.buffer.byteLength < a.byteLength) throw new RangeError("a typed array larger than its buffer");
  return ptr(a);
}
