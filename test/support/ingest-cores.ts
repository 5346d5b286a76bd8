// The model's ways through allocator records, for tests that must hold them to the same answers:
// the native core (cuda/ingest_core.c, every stretch: GPUMEM_NATIVE_CORE=1), the flat TypeScript
// loop (GPUMEM_NATIVE_CORE=0), and the two mixed as the monitor mixes them (unset: the core, and
// the loop for a device whose stretches are short). A device state picks its way at its first
// stretch, so a model made and fed inside `withCore` takes that way throughout.
import { ingestCoreStatus } from "../../src/ffi/ingest-core";
import { findLibrary } from "../../src/ffi/locate";

export const CORES = ["native", "ts", "auto"] as const;
export type Core = (typeof CORES)[number];
/** Each way in a test's name. */
export const WAYS: Record<Core, string> = { native: "the native core", ts: "the TypeScript loop", auto: "the core or the loop as the monitor picks" };

/** `fn` with GPUMEM_NATIVE_CORE set for `core`; the variable as it was afterwards. */
export function withCore<T>(core: Core, fn: () => T): T {
  const before = process.env.GPUMEM_NATIVE_CORE;
  if (core === "auto") delete process.env.GPUMEM_NATIVE_CORE;
  else process.env.GPUMEM_NATIVE_CORE = core === "native" ? "1" : "0";
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env.GPUMEM_NATIVE_CORE;
    else process.env.GPUMEM_NATIVE_CORE = before;
  }
}

/** Where the native library is built, the core must be what ran: a test of the core that fell
 *  back to the TypeScript loop would prove nothing. Null where it ran (or there is no library:
 *  then the TypeScript loop is the one way, and says so); else why not. */
export function nativeMissing(): string | null {
  // a library named by GPUMEM_LIB may predate the core: then the loop is the one way, and says so
  if (!("path" in findLibrary()) || process.env.GPUMEM_LIB) return null;
  const s = ingestCoreStatus();
  return s.native ? null : (s.why ?? "the native ingest core was never loaded");
}
