// Who a process is, from /proc: user, short name, command line and parent. Absent data is null
// (a process that exited between the NVML sample and this read, or another pid namespace).
import { readFileSync } from "node:fs";

export interface ProcessInfo {
  user: string | null;
  name: string | null;
  command: string | null;
  uid: number | null;
  /** The parent's pid (/proc/PID/stat): ranks started by one launcher share it. */
  ppid?: number | null;
}

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
 * The parent pid from the text of /proc/PID/stat: `pid (comm) state ppid …`. The command name may
 * hold spaces and parentheses, so the fields are counted from the last ')'. null where the text is
 * not of that form.
 */
export function parseStatPpid(stat: string): number | null {
  const close = stat.lastIndexOf(")");
  if (close < 0) return null;
  const fields = stat.slice(close + 1).trim().split(/\s+/);
  const ppid = Number(fields[1]);
  return fields.length >= 2 && Number.isInteger(ppid) && ppid >= 0 ? ppid : null;
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
  return { uid, user: uid === null ? null : userName(uid), name, command, ppid };
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
