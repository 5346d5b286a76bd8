// Locating and building libgpumem.so. The monitor builds it on first use where a compiler
// exists, so `bunx gpumem-tui` works from sources; otherwise it says exactly what to install.
import { existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "../..");
export const NATIVE_DIR = join(ROOT, "cuda");
export const NATIVE_SOURCES = ["nvml.c", "ring.c"].map((f) => join(NATIVE_DIR, f));
const NATIVE_HEADERS = ["nvml.h", "ring.h", "gpumem_ring.h"].map((f) => join(NATIVE_DIR, f));
export const BUILT_LIB = join(NATIVE_DIR, "build", "libgpumem.so");
export const BUILD_COMMAND = "bun run build:native";

export type BuildResult =
  | { ok: true; path: string; built: boolean }
  | { ok: false; error: string };

function findCompiler(): string | null {
  const candidates = [process.env.CC, "cc", "gcc", "clang"].filter(Boolean) as string[];
  for (const cc of candidates) if (Bun.which(cc)) return cc;
  return null;
}

function upToDate(lib: string): boolean {
  if (!existsSync(lib)) return false;
  const built = statSync(lib).mtimeMs;
  return [...NATIVE_SOURCES, ...NATIVE_HEADERS].every((f) => !existsSync(f) || statSync(f).mtimeMs <= built);
}

/** Build cuda/build/libgpumem.so unless it is up to date. */
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
