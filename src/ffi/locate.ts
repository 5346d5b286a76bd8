// Which libgpumem.so is there to load, found without building anything: a library built here from
// these sources, or the prebuilt one the package ships for this platform when it was built from the
// very same sources. This runs before NVML's warm-up thread starts (src/ffi/warm-up.ts), the first
// thing the CLI does, so it reads files through Bun's own calls: node:fs and node:path cost about
// 3 ms of start-up together, all of it before the thread could start.
import { ROOT } from "../root";

export { ROOT };
export const NATIVE_DIR = `${ROOT}/cuda`;
/** The ring reader's sources, one job each (ring_reader.h says which): also what a test program that
 *  reads rings in C compiles with. */
export const RING_SOURCES = ["ring_open.c", "ring_guard.c", "ring_read.c", "ring_fold.c"].map((f) => `${NATIVE_DIR}/${f}`);
export const NATIVE_SOURCES = [...["nvml.c", "nvml_lib.c", "nvml_processes.c", "nvml_constants.c", "nvml_warm_up.c", "warm_up_napi.c"].map((f) => `${NATIVE_DIR}/${f}`), ...RING_SOURCES];
const NATIVE_HEADERS = ["nvml.h", "nvml_lib.h", "nvml_constants.h", "ring.h", "ring_reader.h", "gpumem_ring.h"].map((f) => `${NATIVE_DIR}/${f}`);
export const BUILT_LIB = `${NATIVE_DIR}/build/libgpumem.so`;
export const PREBUILT_DIR = `${ROOT}/prebuilt/${process.platform}-${process.arch}`;
export const BUILD_COMMAND = "bun run build:native";

/** A file's modification time in ms, null where there is none. Bun reports a missing file as
 *  size 0 (its lastModified is then no time); none of these files is empty when it exists. */
function modified(path: string): number | null {
  const f = Bun.file(path);
  return f.size > 0 ? f.lastModified : null;
}

/** Whether `lib` exists and no native source is newer than it. */
export function upToDate(lib: string): boolean {
  const built = modified(lib);
  if (built === null) return false;
  return [...NATIVE_SOURCES, ...NATIVE_HEADERS].every((f) => (modified(f) ?? 0) <= built);
}

/** A digest of the native sources: a prebuilt library is used only when it was built from these. */
export function sourceHash(): string {
  const h = new Bun.CryptoHasher("sha256");
  for (const f of [...NATIVE_SOURCES, ...NATIVE_HEADERS]) h.update(Bun.mmap(f));
  return h.digest("hex");
}

/** The package's prebuilt library for this platform, if it matches the sources; else why not. */
export function prebuilt(): { path: string } | { error: string } {
  const path = `${PREBUILT_DIR}/libgpumem.so`;
  if (modified(path) === null) return { error: `no prebuilt libgpumem.so for ${process.platform}-${process.arch}` };
  let id = "";
  try {
    id = new TextDecoder().decode(Bun.mmap(`${PREBUILT_DIR}/build-id`)).trim();
  } catch {
    // no build id: treated as a mismatch
  }
  let sources = "";
  try {
    sources = sourceHash();
  } catch {
    // a native source missing: nothing to compare with
  }
  if (!id || id !== sources) return { error: `the prebuilt libgpumem.so for ${process.platform}-${process.arch} was built from other sources` };
  return { path };
}

/**
 * The library to load, found without building one: $GPUMEM_LIB where set (then that one or none:
 * `final`), else cuda/build/libgpumem.so when up to date, else the package's prebuilt library when
 * it matches the sources; else why not. src/ffi/lib.ts builds where this finds none.
 */
export function findLibrary(): { path: string } | { error: string; final: boolean } {
  const override = process.env.GPUMEM_LIB;
  if (override) return Bun.file(override).size === 0 ? { error: `GPUMEM_LIB=${override}: no such file`, final: true } : { path: override };
  if (upToDate(BUILT_LIB)) return { path: BUILT_LIB };
  const shipped = prebuilt();
  return "path" in shipped ? shipped : { error: shipped.error, final: false };
}
