// Building libgpumem.so with the system C compiler: where no library fits (src/ffi/locate.ts), and
// the package's own steps (postinstall, prepack). Otherwise: what to install, in words.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { BUILD_COMMAND, BUILT_LIB, NATIVE_SOURCES, PREBUILT_DIR, sourceHash, upToDate } from "./locate";

export { BUILD_COMMAND, BUILT_LIB, NATIVE_DIR, NATIVE_SOURCES, PREBUILT_DIR, RING_SOURCES, ROOT, prebuilt, sourceHash, upToDate } from "./locate";

export type BuildResult =
  | { ok: true; path: string; built: boolean }
  | { ok: false; error: string };

function findCompiler(): string | null {
  const candidates = [process.env.CC, "cc", "gcc", "clang"].filter(Boolean) as string[];
  for (const cc of candidates) if (Bun.which(cc)) return cc;
  return null;
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
  // env: process.env, as it is now (src/engine.ts took its settings out; Bun's own default is the
  // environment the process started with).
  const proc = Bun.spawnSync(cmd, { env: process.env, stderr: "pipe", stdout: "pipe" });
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
