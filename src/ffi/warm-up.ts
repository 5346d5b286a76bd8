// NVML's start on a native thread (cuda/nvml_warm_up.c: gpumem_nvml_init_async): nvmlInit and the
// first calls of a sample take about 19 ms on an H100, the longest part of `gpumem-tui --json --once`.
// The CLI calls warmUp() before it loads anything else, so this file imports nothing but the
// library's lookup (locate.ts: a library that is there, never a build, which needs node:fs; where
// none is there the warm-up does nothing and Nvml.open() builds one through lib.ts), and starts the
// thread through libgpumem's Node-API entry (cuda/warm_up_napi.c):
// process.dlopen and one call take ~0.3 ms, where importing bun:ffi and binding a symbol took ~1.4 ms.
// The rest of the binding, src/ffi/nvml.ts (bun:ffi), loads while the thread runs.
import { findLibrary } from "./locate";

/** cuda/nvml.h: GPUMEM_SAMPLE_NO_PCIE, GPUMEM_SAMPLE_NO_PROCESS_UTIL, GPUMEM_WARM_KEEP. */
export const SAMPLE_NO_PCIE = 1;
export const SAMPLE_NO_PROCESS_UTIL = 2;
const WARM_KEEP = 1 << 8;

/**
 * Start NVML and a first sample of every device on a native thread, so that it overlaps the
 * caller's own start-up. `oneShot` (`--json --once`): that sample skips the PCIe counters (a rate
 * needs two samples) and is kept, to be the one the document prints (Nvml.early, Nvml.takeKept).
 * Only the first call starts anything. Never throws: problems surface, in words, at Nvml.open().
 */
let started = false;

export function warmUp(opts: { oneShot?: boolean } = {}): void {
  if (started) return;
  started = true;
  try {
    const found = findLibrary();
    if (!("path" in found)) return; // Nvml.open() builds it, or says why not
    const addon = { exports: {} as { warmUp?: (flags: number) => void } };
    process.dlopen(addon, found.path);
    addon.exports.warmUp?.(opts.oneShot ? SAMPLE_NO_PCIE | WARM_KEEP : 0);
  } catch {
    // no library or no compiler: Nvml.open() says so
  }
}
