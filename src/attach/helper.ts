// The native helper that reaches into a running CPython (cuda/inject.c and its parts): where it is, how it is built
// (the system C compiler, like libgpumem: src/ffi/build.ts), and what its answers mean.
import { existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { NATIVE_DIR } from "../ffi/locate";

/** The helper's sources: main, then its parts (cuda/inject_common.h names what each holds). */
export const INJECT_SOURCES = ["inject.c", "inject_target.c", "inject_threads.c", "inject_call.c", "inject_pep768.c", "inject_common.h"].map((f) => `${NATIVE_DIR}/${f}`);
export const INJECT_BIN = `${NATIVE_DIR}/build/gpumem-inject`;

/** The helper's exit statuses (cuda/inject_common.h, EXIT_*), by what they mean. */
export const HELPER_EXIT = { other: 1, usage: 2, noProcess: 3, notPython: 4, version: 5, ptrace: 6, exited: 7, callTimeout: 8, arch: 9, remoteOff: 10, busy: 11 } as const;

function upToDate(bin: string): boolean {
  try {
    const built = statSync(bin).mtimeMs;
    return INJECT_SOURCES.every((f) => statSync(f).mtimeMs <= built);
  } catch {
    return false;
  }
}

/** CPython 3.14+ takes PEP 768's script file (remote-exec), older ones a pending call (inject). */
export function usesRemoteExec(python: string): boolean {
  const [major, minor] = python.split(".").map(Number);
  return major === 3 && (minor ?? 0) >= 14;
}

/** Build the helper unless it is up to date; an error in words where it cannot be. */
export function buildInject(opts: { force?: boolean; out?: string } = {}): { ok: true; path: string; built: boolean } | { ok: false; error: string } {
  const out = opts.out ?? INJECT_BIN;
  if (!opts.force && upToDate(out)) return { ok: true, path: out, built: false };
  if (process.platform !== "linux" || process.arch !== "x64") return { ok: false, error: `attach works on x86-64 Linux only (this is ${process.platform}-${process.arch})` };
  const cc = [process.env.CC, "cc", "gcc", "clang"].find((c) => c && Bun.which(c));
  if (!cc) return { ok: false, error: "gpumem-inject is not built and no C compiler was found: install one (e.g. `apt install gcc`), then run `bun run build:native`" };
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const cmd = [cc, "-std=c11", "-O2", "-Wall", "-o", tmp, ...INJECT_SOURCES.filter((f) => f.endsWith(".c"))];
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) return { ok: false, error: `building gpumem-inject failed (${cmd.join(" ")}):\n${p.stderr.toString().trim()}` };
  renameSync(tmp, out);
  return { ok: true, path: out, built: true };
}

export interface HelperResult {
  code: number;
  /** The helper's last line on stdout, parsed as key=value words. */
  fields: Record<string, string>;
  /** Its one-line error, without the "gpumem-inject: " prefix. */
  error: string;
}

export function parseFields(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const word of line.trim().split(/\s+/)) {
    const eq = word.indexOf("=");
    if (eq > 0) out[word.slice(0, eq)] = word.slice(eq + 1);
  }
  return out;
}

/** Run the helper: `probe PID`, `inject PID /dev/stdin …` with `input` as the text, or
 *  `remote-exec PID SCRIPT` (CPython 3.14+). */
export function runHelper(args: string[], input?: string): HelperResult {
  const built = buildInject();
  if (!built.ok) return { code: HELPER_EXIT.other, fields: {}, error: built.error };
  const p = Bun.spawnSync([built.path, ...args], { stdin: input === undefined ? "ignore" : Buffer.from(input), stdout: "pipe", stderr: "pipe" });
  const lines = p.stdout.toString().trim().split("\n");
  const error = p.stderr.toString().trim().split("\n").pop()?.replace(/^gpumem-inject: /, "") ?? "";
  return { code: p.exitCode ?? HELPER_EXIT.other, fields: parseFields(lines[lines.length - 1] ?? ""), error };
}

export function helperBuilt(): boolean {
  return existsSync(INJECT_BIN);
}
