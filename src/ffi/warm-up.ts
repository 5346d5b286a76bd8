// NVML's start on a native thread (cuda/nvml.c: gpumem_nvml_init_async): nvmlInit and the first
// calls of a sample take about 19 ms on an H100, the longest part of `gpumem-tui --json --once`.
// The CLI calls warmUp() before it loads anything else, so this file binds that one symbol and
// imports nothing but the library's lookup (bun:ffi compiles a stub per bound symbol; the rest of
// the binding, src/ffi/nvml.ts, loads while the thread runs).
import { dlopen, FFIType } from "bun:ffi";
import { libraryPath } from "./lib";

/** cuda/nvml.h: GPUMEM_SAMPLE_NO_PCIE, GPUMEM_WARM_KEEP. */
export const SAMPLE_NO_PCIE = 1;
const WARM_KEEP = 1 << 8;

/**
 * Start NVML and a first sample of every device on a native thread, so that it overlaps the
 * caller's own start-up. `oneShot` (`--json --once`): that sample skips the PCIe counters (a rate
 * needs two samples) and is kept, to be the one the document prints (Nvml.takeKept). Only the
 * first call starts anything. Never throws: problems surface, in words, at Nvml.open().
 */
let started = false;

export function warmUp(opts: { oneShot?: boolean } = {}): void {
  if (started) return;
  started = true;
  try {
    const lib = dlopen(libraryPath(), { gpumem_nvml_init_async: { args: [FFIType.u32], returns: FFIType.i32 } });
    lib.symbols.gpumem_nvml_init_async(opts.oneShot ? SAMPLE_NO_PCIE | WARM_KEEP : 0);
  } catch {
    // no library or no compiler: Nvml.open() says so
  }
}
