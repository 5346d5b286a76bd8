// The one place that decides which libgpumem.so to load (see locate.ts and build.ts for the order).
import { buildNative } from "./build";
import { BUILD_COMMAND, findLibrary } from "./locate";

export class NativeLibraryError extends Error {
  override name = "NativeLibraryError";
}

let resolved: string | null = null;

/**
 * Path of libgpumem.so: the one locate.ts finds ($GPUMEM_LIB, cuda/build/libgpumem.so when up to
 * date, the package's prebuilt library when it matches the sources); else a build now (a second,
 * once) where a compiler exists.
 */
export function libraryPath(): string {
  if (resolved) return resolved;
  const found = findLibrary();
  if ("path" in found) return (resolved = found.path);
  if (found.final) throw new NativeLibraryError(found.error);
  const result = buildNative();
  if (result.ok) return (resolved = result.path);
  throw new NativeLibraryError(`${found.error}, and ${result.error}\n(the native library is built by \`${BUILD_COMMAND}\`)`);
}
