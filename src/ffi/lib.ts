// The one place that decides which libgpumem.so to load (see locate.ts and build.ts for the order).
import { BUILD_COMMAND, BUILT_LIB, prebuilt, upToDate } from "./locate";

export class NativeLibraryError extends Error {
  override name = "NativeLibraryError";
}

let resolved: string | null = null;

/**
 * Path of libgpumem.so: $GPUMEM_LIB if set; else cuda/build/libgpumem.so when up to date; else
 * the package's prebuilt library for this platform when it matches the sources; else a build now
 * (a second, once) where a compiler exists.
 */
export function libraryPath(): string {
  if (resolved) return resolved;
  const override = process.env.GPUMEM_LIB;
  if (override) {
    if (Bun.file(override).size === 0) throw new NativeLibraryError(`GPUMEM_LIB=${override}: no such file`);
    return (resolved = override);
  }
  if (upToDate(BUILT_LIB)) return (resolved = BUILT_LIB);
  const shipped = prebuilt();
  if ("path" in shipped) return (resolved = shipped.path);
  // Building needs node:fs: loaded only here, off the path of a library that is already there.
  const { buildNative } = require("./build") as typeof import("./build");
  const result = buildNative();
  if (result.ok) return (resolved = result.path);
  throw new NativeLibraryError(`${shipped.error}, and ${result.error}\n(the native library is built by \`${BUILD_COMMAND}\`)`);
}
