// What `gpumem-tui attach` checks before anything is written into the target (docs/protocol.md,
// "Attaching to a running process"). Each refusal is one line: what is wrong, then what to do. The
// message functions are pure (tested without the conditions they describe); the reads are below.
import { existsSync, readFileSync, statSync } from "node:fs";
import { parseStatPpid, parseStatState, readPidNamespace } from "../collect/procfs";

export type Refusal = { ok: false; reason: string; /** --wait may see it change */ waitable?: boolean };
export type Check = { ok: true } | Refusal;

const CAP_SYS_PTRACE = 19;

/** Test-only: where this machine has no torch, the tests attach to plain python3 processes. */
export const ANY_PYTHON_ENV = "GPUMEM_TUI_ATTACH_ANY_PYTHON";

export function noSuchProcess(pid: number, inContainer: boolean): string {
  const ns = inContainer ? " (if it runs outside this container, in another PID namespace, run attach where it runs)" : "";
  return `no process ${pid}: check the pid (nvidia-smi and \`gpumem-tui --json --once\` list GPU processes)${ns}`;
}

export function otherUser(pid: number, owner: number, ownerName: string | null, own: number): string {
  const who = ownerName ? `${ownerName} (uid ${owner})` : `uid ${owner}`;
  const how = ownerName ? `sudo -u ${ownerName} gpumem-tui attach ${pid}` : `run gpumem-tui attach ${pid} as uid ${owner}`;
  return `process ${pid} belongs to ${who}, not to you (uid ${own}): attach as its owner: ${how}`;
}

/** Why ptrace is refused, with the exact fix: Yama's scope, a container without the capability. */
export function ptraceRefused(pid: number, f: { yamaScope: number | null; hasCapPtrace: boolean; inContainer: boolean; isDescendant: boolean; detail?: string }): string {
  const head = `ptrace of process ${pid} refused${f.detail ? ` (${f.detail})` : ""}`;
  if (f.yamaScope === 3) return `${head}: kernel.yama.ptrace_scope is 3 (no ptrace at all until reboot): start the program under \`gpumem-tui run\` instead`;
  if (f.yamaScope === 2 && !f.hasCapPtrace)
    return `${head}: kernel.yama.ptrace_scope is 2 (admin only): run attach with CAP_SYS_PTRACE (e.g. as root: sudo gpumem-tui attach ${pid}), or \`sudo sysctl kernel.yama.ptrace_scope=1\``;
  if (f.yamaScope === 1 && !f.hasCapPtrace && !f.isDescendant)
    return `${head}: kernel.yama.ptrace_scope is 1 (only a parent may trace its child): \`sudo sysctl kernel.yama.ptrace_scope=0\`, or run attach as the same user with CAP_SYS_PTRACE (sudo setpriv --inh-caps +sys_ptrace --ambient-caps +sys_ptrace -- gpumem-tui attach ${pid})`;
  if (f.inContainer && !f.hasCapPtrace) return `${head}: this container has no CAP_SYS_PTRACE: start it with \`--cap-add SYS_PTRACE\` (docker/podman), or run attach on the host`;
  return `${head}: the target may be traced already (a debugger, py-spy) or protected (prctl PR_SET_DUMPABLE 0)`;
}

export function notPython(pid: number, detail: string): string {
  return `process ${pid} is not a CPython process (${detail}): attach reaches Python programs only; others show as NVML rows`;
}

export function unsupportedVersion(detail: string): string {
  return `${detail}`;
}

export function alreadyAttached(pid: number, manifest: string): string {
  return `process ${pid} already has an agent (${manifest}): open \`gpumem-tui\` to see it, or \`gpumem-tui detach ${pid}\` first`;
}

export function noTorch(pid: number, what: "torch" | "cuda"): string {
  return what === "torch"
    ? `process ${pid} has not imported torch yet: nothing to see inside; \`gpumem-tui attach ${pid} --wait\` waits until it has`
    : `process ${pid} has imported torch but not initialized CUDA yet: \`gpumem-tui attach ${pid} --wait\` waits until it has`;
}

export function stoppedProcess(pid: number): string {
  return `process ${pid} is stopped (job control): \`kill -CONT ${pid}\` first, then attach`;
}

export function unsupportedArch(platform: string, arch: string): string {
  return `attach works on x86-64 Linux only (this is ${platform}-${arch}): start the program under \`gpumem-tui run\` instead`;
}

// ---- reads -----------------------------------------------------------------------------------

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

export function yamaScope(): number | null {
  const t = readText("/proc/sys/kernel/yama/ptrace_scope");
  return t === null ? null : Number(t.trim());
}

export function hasCapPtrace(): boolean {
  const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(readText("/proc/self/status") ?? "");
  return m ? (BigInt(`0x${m[1]}`) >> BigInt(CAP_SYS_PTRACE)) & 1n ? true : false : false;
}

export function inContainer(): boolean {
  if (existsSync("/.dockerenv") || existsSync("/run/.containerenv")) return true;
  return /\/(docker|kubepods|containerd|lxc|podman)/.test(readText("/proc/1/cgroup") ?? "");
}

export function ppidOf(pid: number): number | null {
  const stat = readText(`/proc/${pid}/stat`);
  return stat === null ? null : parseStatPpid(stat);
}

export function processState(pid: number): string | null {
  const stat = readText(`/proc/${pid}/stat`);
  return stat === null ? null : parseStatState(stat);
}

export function isDescendant(pid: number, of = process.pid): boolean {
  for (let p: number | null = pid, n = 0; p && p > 1 && n < 4096; p = ppidOf(p), n++) if (p === of) return true;
  return false;
}

export function userName(uid: number): string | null {
  for (const line of (readText("/etc/passwd") ?? "").split("\n")) {
    const f = line.split(":");
    if (f.length > 2 && Number(f[2]) === uid) return f[0]!;
  }
  return null;
}

/** What is mapped into the process that tells torch and CUDA apart (file names in /proc/PID/maps). */
export function mappedLibraries(pid: number): { torch: boolean; cuda: boolean } | null {
  const maps = readText(`/proc/${pid}/maps`);
  if (maps === null) return null;
  return { torch: /\/libtorch(_cpu|_python)?\.so|\/libc10\.so/.test(maps), cuda: /\/libcuda\.so/.test(maps) };
}

/** The checks that need no ptrace: the process, its owner, its state, this machine. */
export function checkProcess(pid: number): Check {
  if (process.platform !== "linux" || process.arch !== "x64") return { ok: false, reason: unsupportedArch(process.platform, process.arch) };
  let owner: number;
  try {
    owner = statSync(`/proc/${pid}`).uid;
  } catch {
    return { ok: false, reason: noSuchProcess(pid, inContainer() || readPidNamespace("self") !== readPidNamespace(1)) };
  }
  const own = process.geteuid?.() ?? 0;
  if (owner !== own) return { ok: false, reason: otherUser(pid, owner, userName(owner), own) };
  const state = processState(pid);
  if (state === "Z" || state === "X") return { ok: false, reason: noSuchProcess(pid, false) };
  if (state === "T") return { ok: false, reason: stoppedProcess(pid) };
  return { ok: true };
}

/** torch imported and CUDA initialized (skipped under ANY_PYTHON_ENV, for the CPU tests only). */
export function checkTorch(pid: number, env: NodeJS.ProcessEnv = process.env): Check {
  if (env[ANY_PYTHON_ENV] === "1") return { ok: true };
  const libs = mappedLibraries(pid);
  if (!libs) return { ok: false, reason: noSuchProcess(pid, false) };
  if (!libs.torch) return { ok: false, reason: noTorch(pid, "torch"), waitable: true };
  if (!libs.cuda) return { ok: false, reason: noTorch(pid, "cuda"), waitable: true };
  return { ok: true };
}

/** Yama's rule, read before anything is tried: a refusal that ptrace itself would give later. */
export function checkYama(pid: number): Check {
  const scope = yamaScope();
  const cap = hasCapPtrace();
  const blocked = scope === 3 || (scope === 2 && !cap) || (scope === 1 && !cap && !isDescendant(pid));
  return blocked ? { ok: false, reason: ptraceContext(pid) } : { ok: true };
}

export function ptraceContext(pid: number, detail?: string): string {
  return ptraceRefused(pid, { yamaScope: yamaScope(), hasCapPtrace: hasCapPtrace(), inContainer: inContainer(), isDescendant: isDescendant(pid), detail });
}
