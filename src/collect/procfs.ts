// Who a process is, from /proc: user, short name and command line. Absent data is null
// (a process that exited between the NVML sample and this read, or another pid namespace).
import { readFileSync } from "node:fs";

export interface ProcessInfo {
  user: string | null;
  name: string | null;
  command: string | null;
  uid: number | null;
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

export function processInfo(pid: number, procRoot = "/proc"): ProcessInfo {
  const status = read(`${procRoot}/${pid}/status`);
  const uidMatch = status?.match(/^Uid:\s+(\d+)/m);
  const uid = uidMatch ? Number(uidMatch[1]) : null;
  const name = read(`${procRoot}/${pid}/comm`)?.trim() || null;
  const raw = read(`${procRoot}/${pid}/cmdline`);
  const command = raw ? raw.replace(/\0+$/, "").split("\0").join(" ").slice(0, COMMAND_MAX) || null : null;
  return { uid, user: uid === null ? null : userName(uid), name, command };
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
