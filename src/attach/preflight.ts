// What `gpumem-tui attach` checks before anything is written into the target (docs/protocol.md,
// "Attaching to a running process"). Each refusal is one line: the true cause, then what to do, a
// remedy that is the user's own to take (never root, never a setting of the whole machine). The
// message functions are pure (tested without the conditions they describe); the reads are below.
import { existsSync, readFileSync, statSync } from "node:fs";
import { parseStatPpid, parseStatState, parseStatusCaps, parseStatusIds, parseTracerPid, readNamespace, readPidNamespace, sameProcess, startTicks } from "../collect/procfs";

export type Refusal = { ok: false; reason: string; /** --wait may see it change */ waitable?: boolean };
export type Check = { ok: true } | Refusal;

const CAP_SYS_PTRACE = 19;

/** Test-only: where this machine has no torch, the tests attach to plain python3 processes. */
export const ANY_PYTHON_ENV = "GPUMEM_TUI_ATTACH_ANY_PYTHON";

/** The way out where ptrace cannot be had: the agent then starts with the program. */
const RUN_INSTEAD = "start the program under `gpumem-tui run` instead (its agent starts with it, no ptrace needed)";

export function noSuchProcess(pid: number, inContainer: boolean): string {
  const ns = inContainer ? " (if it runs outside this container, in another PID namespace, run attach where it runs)" : "";
  return `no process ${pid}: check the pid (nvidia-smi and \`gpumem-tui --json --once\` list GPU processes)${ns}`;
}

export function otherUser(pid: number, owner: number, ownerName: string | null, own: number): string {
  const who = ownerName ? `${ownerName} (uid ${owner})` : `uid ${owner}`;
  // Only the owner attaches without privilege: no message sends the user to sudo or to root.
  const how = owner === 0 ? "" : `; its owner can (\`gpumem-tui attach ${pid}\` run as ${ownerName ?? `uid ${owner}`})`;
  return `process ${pid} belongs to ${who}, not to you (uid ${own}): attach reaches your own processes only${how}`;
}

/** The ids of a process (procfs parseStatusIds): real, effective, saved, filesystem. */
export type Ids = { uid: number[]; gid: number[] };

const ID_NAMES = ["real", "effective", "saved", "fs"] as const;

/** A setuid or setgid program (its ids differ among themselves: a saved id kept to regain privilege
 *  counts too), said with the real id and each other value once; null where they are all one. */
export function setidRefused(pid: number, ids: Ids): string | null {
  const differ = (kind: "uid" | "gid") => {
    const v = ids[kind];
    if (v.every((x) => x === v[0])) return null;
    const said = v.filter((x, i) => v.indexOf(x) === i);
    return said.map((x) => `${ID_NAMES[v.indexOf(x)]} ${kind} ${x}`).join(", ");
  };
  const u = differ("uid");
  const g = differ("gid");
  if (!u && !g) return null;
  const what = u && g ? "setuid and setgid" : u ? "setuid" : "setgid";
  return `process ${pid} runs ${what} (${[u, g].filter(Boolean).join("; ")}): attach does not reach into a program more privileged than the user who started it (the agent would act on that user's settings with its privileges); to look inside, start it from an interpreter without the ${u ? "setuid" : "setgid"} bit`;
}

/** Capability names by bit (linux/capability.h), for the refusals' words. */
const CAP_NAMES = [
  "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap", "linux_immutable",
  "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace",
  "sys_pacct", "sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write",
  "audit_control", "setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
  "checkpoint_restore",
];

/** The capabilities of a mask by name (cap_N past this table); a long list shortened. */
export function capNames(mask: bigint): string {
  const names: string[] = [];
  for (let bit = 0; mask >> BigInt(bit) !== 0n; bit++) if ((mask >> BigInt(bit)) & 1n) names.push(`cap_${CAP_NAMES[bit] ?? bit}`);
  return names.length > 4 ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more` : names.join(", ");
}

/**
 * Capabilities that refuse the attach. The agent takes its settings (GPUMEM_*, CXX, HOME…) from the
 * program's environment, which the user who started it chose: in a process holding privilege that
 * user lacks, they would run with it. So:
 * - a process of any uid but root that holds a permitted or effective capability (a file capability
 *   set with `setcap`, an ambient set) is refused, whoever attaches;
 * - a process of root (every uid 0, setuid refused before) is root's own program: root chose its
 *   environment, and root attaching its own training is ordinary (a GPU host's jobs often run as
 *   root with every capability). Refused only where it holds capabilities the monitor lacks
 *   (`own`, its effective set): an attach never reaches a process more privileged than itself.
 * Null where nothing refuses it, or the target's sets are unknown (`caps` null).
 */
export function capsRefused(pid: number, uid: number, caps: { permitted: bigint; effective: bigint } | null, own: bigint): string | null {
  const held = caps ? caps.permitted | caps.effective : 0n;
  if (held === 0n) return null;
  if (uid !== 0)
    return `process ${pid} holds capabilities (${capNames(held)}) though it runs as uid ${uid} (a file capability set with setcap, or an ambient set): attach does not reach into a program more privileged than its user; to look inside, start it from an interpreter without them`;
  const beyond = held & ~own;
  if (beyond === 0n) return null;
  return `process ${pid} holds capabilities this monitor lacks (${capNames(beyond)}): attach does not reach into a process more privileged than itself; run attach with the capabilities the program has`;
}

/** Who may be attached, from the target's ids and capabilities and the monitor's, in the order that
 *  names the true cause: a setuid program or one holding capabilities is refused as such (becoming
 *  its owner would not help), then another user's process, then root's holding more than we do. */
export function privilegeRefused(pid: number, ids: Ids, caps: { permitted: bigint; effective: bigint } | null, own: { uid: number; caps: bigint }, nameOf: (uid: number) => string | null = userName): string | null {
  const uid = ids.uid[0]!;
  return (
    setidRefused(pid, ids) ??
    (uid !== 0 ? capsRefused(pid, uid, caps, own.caps) : null) ??
    (uid !== own.uid ? otherUser(pid, uid, nameOf(uid), own.uid) : null) ??
    (uid === 0 ? capsRefused(pid, uid, caps, own.caps) : null)
  );
}

/** Only one tracer at a time: a debugger, strace or py-spy holds it. */
export function tracedBy(pid: number, tracer: number, name: string | null): string {
  return `process ${pid} is already traced by process ${tracer}${name ? ` (${name})` : ""}: a process has one tracer at a time; attach once that one has let go of it (end it, or detach it)`;
}

/** Another mount, user or pid namespace: the token and the agent's files live in /tmp, /dev/shm or
 *  the runtime directory as each side sees them, which are other files there; its uids are not ours;
 *  its agent names its files by the pid it has there, which is not the one asked for here. */
export function otherNamespace(pid: number, kinds: NamespaceName[]): string {
  const why = kinds.includes("mount")
    ? "its /tmp and /dev/shm are not these, so the files attach and its agent share would not meet"
    : kinds.includes("user")
      ? "its uids are not these"
      : `it has another pid there than ${pid}, and its agent would name its files by that one, which attach would never find`;
  return `process ${pid} runs in another ${kinds.join(" and ")} namespace than this monitor (a container, or unshare): ${why}; run attach inside that namespace, where the program runs`;
}

export type NamespaceName = "user" | "mount" | "pid";

/** /proc/PID is root's while the status says another user: the kernel marks the process not
 *  dumpable, and only CAP_SYS_PTRACE traces it. */
export function notDumpable(pid: number): string {
  return `process ${pid} is not dumpable (it, or a library it loaded, called prctl(PR_SET_DUMPABLE, 0)): the kernel lets no process without CAP_SYS_PTRACE trace it; ${RUN_INSTEAD}`;
}

/** The pid names another process than the one asked for: that one exited, the pid was reused. */
export function notSameProcess(pid: number): string {
  return `process ${pid} exited, and pid ${pid} now names another process (started since): check the pid`;
}

/** Why ptrace is refused, with a remedy that is the user's own to take: a tracer already there,
 *  Yama's scope, a container without the capability, else the kernel's own refusal. */
export function ptraceRefused(
  pid: number,
  f: { yamaScope: number | null; hasCapPtrace: boolean; inContainer: boolean; isDescendant: boolean; detail?: string; tracer?: { pid: number; name: string | null } | null },
): string {
  if (f.tracer) return tracedBy(pid, f.tracer.pid, f.tracer.name);
  const head = `ptrace of process ${pid} refused${f.detail ? ` (${f.detail})` : ""}`;
  if (f.yamaScope === 3) return `${head}: kernel.yama.ptrace_scope is 3 (no ptrace at all until reboot): ${RUN_INSTEAD}`;
  if (f.yamaScope === 2 && !f.hasCapPtrace) return `${head}: kernel.yama.ptrace_scope is 2 (only a process with CAP_SYS_PTRACE may trace): ${RUN_INSTEAD}`;
  if (f.yamaScope === 1 && !f.hasCapPtrace && !f.isDescendant)
    return `${head}: kernel.yama.ptrace_scope is 1 (a process may trace only its descendants, or one that allowed it with prctl(PR_SET_PTRACER)): ${RUN_INSTEAD}`;
  if (f.inContainer && !f.hasCapPtrace)
    return `${head}: this container has no CAP_SYS_PTRACE (its seccomp profile may forbid ptrace): start the container with \`--cap-add SYS_PTRACE\` (docker/podman), or ${RUN_INSTEAD}`;
  return `${head}: the kernel refused it (a security module such as AppArmor or SELinux, or a seccomp filter): ${RUN_INSTEAD}`;
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
  return `attach works on x86-64 Linux only (this is ${platform}-${arch}): ${RUN_INSTEAD}`;
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

/** The monitor's effective capabilities (none where unreadable). */
export function ownCaps(): bigint {
  return parseStatusCaps(readText("/proc/self/status") ?? "")?.effective ?? 0n;
}

export function hasCapPtrace(): boolean {
  return ((ownCaps() >> BigInt(CAP_SYS_PTRACE)) & 1n) === 1n;
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

/** The process tracing `pid` now and its name; null where none (or unreadable). */
export function tracerOf(pid: number, status = readText(`/proc/${pid}/status`)): { pid: number; name: string | null } | null {
  const tracer = status === null ? null : parseTracerPid(status);
  return tracer ? { pid: tracer, name: readText(`/proc/${tracer}/comm`)?.trim() || null } : null;
}

/** The namespaces in which `pid` differs from this monitor, of those that make an attach unsafe or
 *  unable to meet its agent. A link unreadable on either side is not said: ptrace, refused then too,
 *  speaks for it. */
export function otherNamespaces(pid: number): NamespaceName[] {
  const differs = (kind: "user" | "mnt" | "pid") => {
    const theirs = readNamespace(pid, kind);
    const ours = readNamespace("self", kind);
    return theirs !== null && ours !== null && theirs !== ours;
  };
  return [...(differs("user") ? (["user"] as const) : []), ...(differs("mnt") ? (["mount"] as const) : []), ...(differs("pid") ? (["pid"] as const) : [])];
}

/** What is mapped into the process that tells torch and CUDA apart (file names in /proc/PID/maps). */
export function mappedLibraries(pid: number): { torch: boolean; cuda: boolean } | null {
  const maps = readText(`/proc/${pid}/maps`);
  if (maps === null) return null;
  return { torch: /\/libtorch(_cpu|_python)?\.so|\/libc10\.so/.test(maps), cuda: /\/libcuda\.so/.test(maps) };
}

/** The checks that need no ptrace: the process, its privileges and owner, its namespaces, a tracer,
 *  its state, this machine. Run again right before anything is written (an exec since the first
 *  check keeps the pid and its start time but may have made it setuid). */
export function checkProcess(pid: number): Check {
  if (process.platform !== "linux" || process.arch !== "x64") return { ok: false, reason: unsupportedArch(process.platform, process.arch) };
  const status = readText(`/proc/${pid}/status`);
  const ids = status === null ? null : parseStatusIds(status);
  const state = processState(pid);
  if (status === null || ids === null || state === null) return { ok: false, reason: noSuchProcess(pid, inContainer() || readPidNamespace("self") !== readPidNamespace(1)) };
  if (state === "Z" || state === "X") return { ok: false, reason: noSuchProcess(pid, false) };
  // Namespaces first: another user namespace's uids and capabilities are not comparable to ours
  // (`unshare -Ur` gives a process every capability there, and none here).
  const ns = otherNamespaces(pid);
  if (ns.length) return { ok: false, reason: otherNamespace(pid, ns) };
  const privilege = privilegeRefused(pid, ids, parseStatusCaps(status), { uid: process.geteuid?.() ?? 0, caps: ownCaps() });
  if (privilege) return { ok: false, reason: privilege };
  const tracer = tracerOf(pid, status);
  if (tracer) return { ok: false, reason: tracedBy(pid, tracer.pid, tracer.name) };
  const dumper = dumpOwner(pid);
  if (!hasCapPtrace() && dumper !== null && dumper !== ids.uid[1]) return { ok: false, reason: notDumpable(pid) };
  if (state === "T") return { ok: false, reason: stoppedProcess(pid) };
  return { ok: true };
}

/** The owner of /proc/PID: the effective uid, or root's where the kernel marks it not dumpable. */
function dumpOwner(pid: number): number | null {
  try {
    return statSync(`/proc/${pid}`).uid;
  } catch {
    return null;
  }
}

/** Whether `pid` is still the process whose start time (procfs startTicks) was read first: null
 *  where it is, "exited" where it is gone, "reused" where the pid names a later process. */
export function lostProcess(pid: number, start: number | null): "exited" | "reused" | null {
  if (sameProcess(pid, start)) return null;
  return start === null || startTicks(pid) === null ? "exited" : "reused";
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

/** Why ptrace was refused, from what holds now: a tracer that came since the preflight among it. */
export function ptraceContext(pid: number, detail?: string): string {
  return ptraceRefused(pid, { yamaScope: yamaScope(), hasCapPtrace: hasCapPtrace(), inContainer: inContainer(), isDescendant: isDescendant(pid), detail, tracer: tracerOf(pid) });
}
