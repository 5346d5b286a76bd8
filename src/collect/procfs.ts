// Who a process is, from /proc: user, short name, command line and parent. Absent data is null
// (a process that exited between the NVML sample and this read, or another pid namespace).
import { readFileSync, readlinkSync } from "node:fs";
import type { PidNsInfo, ProcessInfo } from "../system/process";

const COMMAND_MAX = 512;
let users: Map<number, string> | null = null;

function userName(uid: number): string {
  if (!users) {
    users = new Map();
    try {
      for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
        const [name, , id] = line.split(":");
        if (name && id) users.set(Number(id), name);
      }
    } catch {
      // no passwd file: fall back to numeric ids
    }
  }
  return users.get(uid) ?? String(uid);
}

function read(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/**
 * The fields of /proc/PID/stat's text after the command name (`pid (comm) state ppid …`: the state,
 * field 3, at index 0). The command name may hold spaces and parentheses, so the fields are counted
 * from the last ')'. null where the text is not of that form.
 */
function statFields(stat: string): string[] | null {
  const close = stat.lastIndexOf(")");
  return close < 0 ? null : stat.slice(close + 1).trim().split(/\s+/);
}

/** The parent pid from the text of /proc/PID/stat; null where the text is not of that form. */
export function parseStatPpid(stat: string): number | null {
  const fields = statFields(stat);
  if (!fields) return null;
  const ppid = Number(fields[1]);
  return fields.length >= 2 && Number.isInteger(ppid) && ppid >= 0 ? ppid : null;
}

/** Clock ticks a second in /proc/PID/stat (USER_HZ: 100 on every Linux the kernel exports to). */
const USER_HZ = 100;

/** From /proc/PID/stat's text: CPU seconds (utime + stime) and the start time in seconds after
 *  boot; null where the text is not of that form. */
export function parseStatTimes(stat: string): { cpu_seconds: number; start_seconds: number } | null {
  // Fields after "(comm)": state is field 3, utime 14, stime 15, starttime 22.
  const f = statFields(stat);
  if (!f) return null;
  const utime = Number(f[11]);
  const stime = Number(f[12]);
  const start = Number(f[19]);
  if (![utime, stime, start].every((x) => Number.isFinite(x) && x >= 0)) return null;
  return { cpu_seconds: (utime + stime) / USER_HZ, start_seconds: start / USER_HZ };
}

/** Field 22 of /proc/PID/stat, the start time in clock ticks after boot: with the pid, what tells
 *  a process from a later one given the same pid (the attached agent compares it, attaching.py).
 *  Null where unreadable. */
export function startTicks(pid: number | "self", procRoot = "/proc"): number | null {
  const stat = read(`${procRoot}/${pid}/stat`);
  const times = stat === null ? null : parseStatTimes(stat);
  return times === null ? null : Math.round(times.start_seconds * USER_HZ);
}

/** Whether `pid` is still the process that had start time `start` (startTicks) when first read:
 *  a pid the kernel gave to a later process since (the first exited) has another start time. An
 *  exec keeps both: what it changed (setuid, capabilities) is the preflight's to check again. */
export function sameProcess(pid: number, start: number | null, procRoot = "/proc"): boolean {
  return start !== null && startTicks(pid, procRoot) === start;
}

/** The Uid: and Gid: lines of /proc/PID/status's text: [real, effective, saved, filesystem] each;
 *  null where either is missing or not four ids. */
export function parseStatusIds(status: string): { uid: number[]; gid: number[] } | null {
  const ids = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s+(\\d+)\\s*$`, "m").exec(status);
    return m ? m.slice(1, 5).map(Number) : null;
  };
  const uid = ids("Uid");
  const gid = ids("Gid");
  return uid && gid ? { uid, gid } : null;
}

/** The permitted and effective capability sets (CapPrm:, CapEff:) of /proc/PID/status's text, as
 *  bit masks; null where either is missing. */
export function parseStatusCaps(status: string): { permitted: bigint; effective: bigint } | null {
  const mask = (key: string) => {
    const m = new RegExp(`^${key}:\\s*([0-9a-f]+)\\s*$`, "m").exec(status);
    return m ? BigInt(`0x${m[1]}`) : null;
  };
  const permitted = mask("CapPrm");
  const effective = mask("CapEff");
  return permitted === null || effective === null ? null : { permitted, effective };
}

/** TracerPid: of /proc/PID/status's text: the pid tracing it (a debugger, strace, py-spy), 0 for
 *  none; null where missing. */
export function parseTracerPid(status: string): number | null {
  const m = /^TracerPid:\s*(\d+)\s*$/m.exec(status);
  return m ? Number(m[1]) : null;
}

/** VmRSS of /proc/PID/status's text, in bytes; null where absent (a kernel thread, a zombie). */
export function parseRss(status: string): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  return m ? Number(m[1]) * 1024 : null;
}

/** The monitor's own user, named as processInfo names a process's (the GPU ledger tells other
 *  users' processes apart by it); null where the platform has no uid. */
export function ownUser(): string | null {
  const uid = process.getuid?.();
  return uid === undefined ? null : userName(uid);
}

export function processInfo(pid: number, procRoot = "/proc"): ProcessInfo {
  const status = read(`${procRoot}/${pid}/status`);
  const uidMatch = status?.match(/^Uid:\s+(\d+)/m);
  const uid = uidMatch ? Number(uidMatch[1]) : null;
  const name = read(`${procRoot}/${pid}/comm`)?.trim() || null;
  const raw = read(`${procRoot}/${pid}/cmdline`);
  const command = raw ? raw.replace(/\0+$/, "").split("\0").join(" ").slice(0, COMMAND_MAX) || null : null;
  const stat = read(`${procRoot}/${pid}/stat`);
  const ppid = stat === null ? null : parseStatPpid(stat);
  const times = stat === null ? null : parseStatTimes(stat);
  const uptime = times ? Number(read(`${procRoot}/uptime`)?.split(/\s+/)[0]) : Number.NaN;
  return {
    uid,
    user: uid === null ? null : userName(uid),
    name,
    command,
    ppid,
    cpu_seconds: times?.cpu_seconds ?? null,
    host_memory_bytes: status === null ? null : parseRss(status),
    run_time_seconds: times && Number.isFinite(uptime) ? Math.max(0, uptime - times.start_seconds) : null,
  };
}

/** The state letter of /proc/PID/stat's text (R, S, D, Z, X…); null where it cannot be read. */
export function parseStatState(stat: string): string | null {
  const close = stat.lastIndexOf(")");
  const state = close < 0 ? "" : stat.slice(close + 2, close + 3);
  return /^[A-Za-z]$/.test(state) ? state : null;
}

/** Whether the process runs. A zombie has exited: killed and not reaped yet, as a rank is until its
 *  launcher next polls (torchrun every few seconds), it still answers signal 0. */
export function pidAlive(pid: number, procRoot = "/proc"): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  let stat: string;
  try {
    stat = readFileSync(`${procRoot}/${pid}/stat`, "latin1");
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "ENOENT"; // gone since; else not ours to read: signal 0 answered
  }
  const state = parseStatState(stat);
  return state !== "Z" && state !== "X";
}

/** PF_EXITING in the flags of /proc/PID/stat (field 9): set when the process begins to exit, before
 *  its memory map is torn down, so it tells an exiting process from one whose maps are just odd. */
const PF_EXITING = 0x4;

export function parseStatExiting(stat: string): boolean {
  const flags = Number(statFields(stat)?.[6]);
  return Number.isInteger(flags) && (flags & PF_EXITING) !== 0;
}

/** Whether the process has exited or is exiting (gone, a zombie, or flagged exiting), from one read
 *  of its stat: what a failure to read or stop it then means. */
export function pidEnding(pid: number, procRoot = "/proc"): boolean {
  let stat: string;
  try {
    stat = readFileSync(`${procRoot}/${pid}/stat`, "latin1");
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT"; // gone; else not ours to read
  }
  const state = parseStatState(stat);
  return state === "Z" || state === "X" || parseStatExiting(stat);
}

/** The pids of the NSpid line of /proc/PID/status's text; null where there is none. */
export function parseNsPid(status: string): number[] | null {
  const m = /^NSpid:[ \t]*([\d \t]+)$/m.exec(status);
  if (!m) return null;
  const pids = m[1]!.trim().split(/\s+/).map(Number);
  return pids.length && pids.every((p) => Number.isInteger(p) && p > 0) ? pids : null;
}

/** The namespaces compared by the monitor: pid (a container's pids), and for attach mnt (whose
 *  /tmp and /dev/shm) and user (whose uids). */
export type NamespaceKind = "pid" | "mnt" | "user";

/** The inode of a namespace from its link's text ("pid:[4026531836]"), where it is of that kind;
 *  null otherwise. */
export function parseNsLink(link: string, kind: NamespaceKind = "pid"): number | null {
  const m = /^([a-z_]+):\[(\d+)\]$/.exec(link.trim());
  return m && m[1] === kind ? Number(m[2]) : null;
}

/** The inode of `pid`'s namespace of that kind ("self": the monitor's own); null where it cannot
 *  be read (gone, or another user's: the link needs ptrace-read access). */
export function readNamespace(pid: number | "self", kind: NamespaceKind, procRoot = "/proc"): number | null {
  try {
    return parseNsLink(readlinkSync(`${procRoot}/${pid}/ns/${kind}`), kind);
  } catch {
    return null;
  }
}

/** The pid namespace inode of `pid` ("self": the monitor's own); null where it cannot be read. */
export function readPidNamespace(pid: number | "self", procRoot = "/proc"): number | null {
  return readNamespace(pid, "pid", procRoot);
}

export function pidNsInfo(pid: number, procRoot = "/proc"): PidNsInfo {
  const status = read(`${procRoot}/${pid}/status`);
  return { nspid: status === null ? null : parseNsPid(status), pid_namespace: readPidNamespace(pid, procRoot) };
}

/** The host's own pid namespace: the kernel's PROC_PID_INIT_INO (include/linux/proc_ns.h), the
 *  same inode on every Linux since 3.8. Any other is a container's (or unshare's). */
export const INITIAL_PID_NAMESPACE = 0xeffffffc;

/** Whether the monitor runs in a pid namespace of its own (a container): NVML then lists only that
 *  namespace's processes, and the rest of the GPU's used memory belongs to no pid it can name.
 *  Unknown (no /proc): not. */
export function inNestedPidNamespace(own: number | null = ownPidNamespace()): boolean {
  return own !== null && own !== INITIAL_PID_NAMESPACE;
}

let ownNamespace: number | null | undefined;
/** The monitor's own pid namespace (read once). */
export function ownPidNamespace(): number | null {
  if (ownNamespace === undefined) ownNamespace = readPidNamespace("self");
  return ownNamespace;
}

/** Whether a process whose agent reports pid namespace `ns` lives in another one than the
 *  monitor (a container): its pid is then not the host's. Unknown on either side: not. */
export function inOtherPidNamespace(ns: number | null | undefined, own: number | null = ownPidNamespace()): boolean {
  return ns != null && own !== null && ns !== own;
}
