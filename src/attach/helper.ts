// The native helper that reaches into a running CPython (cuda/inject.c and its parts): where it is, how it is built
// (the system C compiler, like libgpumem: src/ffi/build.ts), and what its answers mean.
import { existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { NATIVE_DIR } from "../ffi/locate";

/** The helper's sources: main, then its parts (cuda/inject_common.h names what each holds). */
export const INJECT_SOURCES = ["inject.c", "inject_target.c", "inject_threads.c", "inject_call.c", "inject_pep768.c", "inject_common.h"].map((f) => `${NATIVE_DIR}/${f}`);
export const INJECT_BIN = `${NATIVE_DIR}/build/gpumem-inject`;

/** The helper's exit statuses (cuda/inject_common.h, EXIT_*), by what they mean; `killed` is the
 *  monitor's own: the helper ran past its time and was killed (runHelper). */
export const HELPER_EXIT = { other: 1, usage: 2, noProcess: 3, notPython: 4, version: 5, ptrace: 6, exited: 7, callTimeout: 8, arch: 9, remoteOff: 10, busy: 11, unreadable: 12, notSame: 13, killed: 137 } as const;

/** How long each of the helper's verbs may run before it is killed (ms). `probe` stops nothing, so
 *  a kill harms nothing; it reads the target exactly as inject and remote-exec do first, so a helper
 *  that would block there is caught by the probe. inject and remote-exec get more than their own
 *  bounded waits add up to (stopping every thread at most 3 s, each of at most three calls its
 *  --timeout-ms, at most 2 s, plus 1 s to stop it again): a kill in the middle of a call would let
 *  the thread run on at the call's return address 0, so it must only ever end a helper stuck past
 *  every bound it has. Killing a tracer detaches its tracees: threads it held stopped run on. */
export const HELPER_LIMIT_MS: Record<string, number> = { probe: 5_000, inject: 20_000, "remote-exec": 20_000 };

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

type BuildPlan = { cmd: string[]; tmp: string; out: string };
type BuildResult = { ok: true; path: string; built: boolean } | { ok: false; error: string };

/** What building the helper takes: nothing (up to date), an error in words, or the compiler's command. */
function planBuild(opts: { force?: boolean; out?: string }): BuildResult | BuildPlan {
  const out = opts.out ?? INJECT_BIN;
  if (!opts.force && upToDate(out)) return { ok: true, path: out, built: false };
  if (process.platform !== "linux" || process.arch !== "x64") return { ok: false, error: `attach works on x86-64 Linux only (this is ${process.platform}-${process.arch})` };
  const cc = [process.env.CC, "cc", "gcc", "clang"].find((c) => c && Bun.which(c));
  if (!cc) return { ok: false, error: "gpumem-inject is not built and no C compiler was found: install one (e.g. `apt install gcc`), then run `bun run build:native`" };
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  return { cmd: [cc, "-std=c11", "-O2", "-Wall", "-o", tmp, ...INJECT_SOURCES.filter((f) => f.endsWith(".c"))], tmp, out };
}

function finishBuild(plan: BuildPlan, code: number | null, stderr: string): BuildResult {
  if (code !== 0) return { ok: false, error: `building gpumem-inject failed (${plan.cmd.join(" ")}):\n${stderr.trim()}` };
  renameSync(plan.tmp, plan.out);
  return { ok: true, path: plan.out, built: true };
}

/** Build the helper unless it is up to date; an error in words where it cannot be. */
export function buildInject(opts: { force?: boolean; out?: string } = {}): BuildResult {
  const plan = planBuild(opts);
  if ("ok" in plan) return plan;
  const p = Bun.spawnSync(plan.cmd, { env: process.env, stdout: "pipe", stderr: "pipe" });
  return finishBuild(plan, p.exitCode, p.stderr.toString());
}

/** buildInject without blocking the event loop: the `a` key's attach builds it while the screens draw. */
async function buildInjectAsync(): Promise<BuildResult> {
  const plan = planBuild({});
  if ("ok" in plan) return plan;
  const p = Bun.spawn(plan.cmd, { env: process.env, stdout: "ignore", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  return finishBuild(plan, code, stderr);
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
 *  `remote-exec PID SCRIPT` (CPython 3.14+). Asynchronous, so that the screens keep drawing while
 *  it works, and killed past its verb's limit (HELPER_LIMIT_MS; `limitMs` for the tests), which is
 *  then its one-line error. */
export async function runHelper(args: string[], input?: string, limitMs = HELPER_LIMIT_MS[args[0] ?? ""] ?? 5_000): Promise<HelperResult> {
  const built = await buildInjectAsync();
  if (!built.ok) return { code: HELPER_EXIT.other, fields: {}, error: built.error };
  // env: process.env as it is now, without the engine's settings (src/engine.ts), as every child.
  const p = Bun.spawn([built.path, ...args], { env: process.env, stdin: input === undefined ? "ignore" : new TextEncoder().encode(input), stdout: "pipe", stderr: "pipe" });
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    p.kill("SIGKILL");
  }, limitMs);
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  if (killed) return { code: HELPER_EXIT.killed, fields: {}, error: killedLine(args, limitMs) };
  const lines = stdout.trim().split("\n");
  const error = stderr.trim().split("\n").pop()?.replace(/^gpumem-inject: /, "") ?? "";
  return { code: code ?? HELPER_EXIT.other, fields: parseFields(lines[lines.length - 1] ?? ""), error };
}

/** The helper killed past its limit, said once: which step, how long, and that the target runs on. */
function killedLine(args: string[], limitMs: number): string {
  const secs = limitMs % 1000 === 0 ? String(limitMs / 1000) : (limitMs / 1000).toFixed(1);
  return `the helper (gpumem-inject ${args[0]}) did not answer within ${secs} s and was stopped; process ${args[1]} was let go and runs on as it was`;
}

export function helperBuilt(): boolean {
  return existsSync(INJECT_BIN);
}
