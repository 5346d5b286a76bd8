// The one place that decides which libgpumem.so to load.
import { existsSync } from "node:fs";
import { BUILD_COMMAND, BUILT_LIB, buildNative } from "./build";

export class NativeLibraryError extends Error {
  override name = "NativeLibraryError";
}

let resolved: string | null = null;

/**
 * Path of libgpumem.so: $GPUMEM_LIB if set, else cuda/build/libgpumem.so, built now (a second or
 * two, once) when a compiler is present and the library is missing or older than its sources.
 */
export function libraryPath(): string {
  if (resolved) return resolved;
  const override = process.env.GPUMEM_LIB;
  if (override) {
    if (!existsSync(override)) throw new NativeLibraryError(`GPUMEM_LIB=${override}: no such file`);
    return (resolved = override);
  }
  const result = buildNative();
  if (result.ok) return (resolved = result.path);
  if (existsSync(BUILT_LIB)) return (resolved = BUILT_LIB); // stale but usable: better than nothing
  throw new NativeLibraryError(`${result.error}\n(the native library is built by \`${BUILD_COMMAND}\`)`);
}
