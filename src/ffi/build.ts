// Locating and building libgpumem.so. Three sources, in order: a library built here from these
// sources, the prebuilt one the package ships for this platform (when it was built from the very
// same sources), or a build now with the system C compiler. Otherwise: what to install, in words.
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ROOT } from "../root";

export { ROOT };
export const NATIVE_DIR = join(ROOT, "cuda");
export const NATIVE_SOURCES = ["nvml.c", "nvml_lib.c", "nvml_processes.c", "nvml_constants.c", "ring.c"].map((f) => join(NATIVE_DIR, f));
const NATIVE_HEADERS = ["nvml.h", "nvml_lib.h", "nvml_constants.h", "ring.h", "gpumem_ring.h"].map((f) => join(NATIVE_DIR, f));
export const BUILT_LIB = join(NATIVE_DIR, "build", "libgpumem.so");
export const PREBUILT_DIR = join(ROOT, "prebuilt", `${process.platform}-${process.arch}`);
export const BUILD_COMMAND = "bun run build:native";

export type BuildResult =
  | { ok: true; path: string; built: boolean }
  | { ok: false; error: string };

function findCompiler(): string | null {
  const candidates = [process.env.CC, "cc", "gcc", "clang"].filter(Boolean) as string[];
  for (const cc of candidates) if (Bun.which(cc)) return cc;
  return null;
}

export function upToDate(lib: string): boolean {
  if (!existsSync(lib)) return false;
  const built = statSync(lib).mtimeMs;
  return [...NATIVE_SOURCES, ...NATIVE_HEADERS].every((f) => !existsSync(f) || statSync(f).mtimeMs <= built);
}

/** A digest of the native sources: a prebuilt library is used only when it was built from these. */
export function sourceHash(): string {
  const h = new Bun.CryptoHasher("sha256");
  for (const f of [...NATIVE_SOURCES, ...NATIVE_HEADERS]) h.update(readFileSync(f));
  return h.digest("hex");
}

/** The package's prebuilt library for this platform, if it matches the sources; else why not. */
export function prebuilt(): { path: string } | { error: string } {
  const path = join(PREBUILT_DIR, "libgpumem.so");
  if (!existsSync(path)) return { error: `no prebuilt libgpumem.so for ${process.platform}-${process.arch}` };
  let id = "";
  try {
    id = readFileSync(join(PREBUILT_DIR, "build-id"), "utf8").trim();
  } catch {
    // no build id: treated as a mismatch
  }
  if (id !== sourceHash()) return { error: `the prebuilt libgpumem.so for ${process.platform}-${process.arch} was built from other sources` };
  return { path };
}

/** Build libgpumem.so (into cuda/build by default) unless it is up to date. */
export function buildNative(opts: { force?: boolean; out?: string } = {}): BuildResult {
  const out = opts.out ?? BUILT_LIB;
  if (!opts.force && upToDate(out)) return { ok: true, path: out, built: false };
  const cc = findCompiler();
  if (!cc) {
    return {
      ok: false,
      error: `libgpumem.so is not built and no C compiler was found: install one (e.g. \`apt install gcc\`), then run \`${BUILD_COMMAND}\``,
    };
  }
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const cmd = [cc, "-std=c11", "-O2", "-Wall", "-fPIC", "-shared", "-o", tmp, ...NATIVE_SOURCES, "-ldl", "-lpthread"];
  const proc = Bun.spawnSync(cmd, { stderr: "pipe", stdout: "pipe" });
  if (proc.exitCode !== 0) {
    return {
      ok: false,
      error: `building libgpumem.so failed (${cmd.join(" ")}):\n${proc.stderr.toString().trim()}`,
    };
  }
  // Rename into place so that a concurrent loader never maps a half-written library.
  renameSync(tmp, out);
  return { ok: true, path: out, built: true };
}

/** The package script's step (prepack): the prebuilt library and the digest of its sources. */
export function buildPrebuilt(): BuildResult {
  const result = buildNative({ force: true, out: join(PREBUILT_DIR, "libgpumem.so") });
  if (result.ok) writeFileSync(join(PREBUILT_DIR, "build-id"), `${sourceHash()}\n`);
  return result;
}
