// Who a process is and where it sits among pid namespaces: what /proc says (src/collect/procfs.ts
// reads it), as the document's builder and the agents' join take it.

export interface ProcessInfo {
  user: string | null;
  name: string | null;
  command: string | null;
  uid: number | null;
  /** The parent's pid (/proc/PID/stat): ranks started by one launcher share it. */
  ppid?: number | null;
  /** CPU time used so far, user and system, in seconds (/proc/PID/stat utime + stime). */
  cpu_seconds?: number | null;
  /** Resident host memory (VmRSS). */
  host_memory_bytes?: number | null;
  /** Seconds since the process started (/proc/PID/stat starttime against /proc/uptime). */
  run_time_seconds?: number | null;
  /** % of one core since the previous sample (the collector keeps the previous CPU time). */
  cpu_percent?: number | null;
}

/** % of one core between two readings of a process's CPU time; null without a previous one, or
 *  where time did not move forward or the counter went back (a pid reused by a new process). */
export function cpuPercent(prevSeconds: number | null | undefined, prevMs: number | null | undefined, curSeconds: number | null | undefined, curMs: number): number | null {
  if (prevSeconds == null || prevMs == null || curSeconds == null) return null;
  const wall = (curMs - prevMs) / 1000;
  if (!(wall > 0) || curSeconds < prevSeconds) return null;
  return Math.round(((curSeconds - prevSeconds) / wall) * 1000) / 10;
}

/** Where a process sits among pid namespaces: what a container's pids are joined on. */
export interface PidNsInfo {
  /** /proc/PID/status's NSpid: its pid in the reader's namespace first, its own namespace's pid
   *  (what the process calls itself: os.getpid()) last; null where the line is missing. */
  nspid: number[] | null;
  /** The inode of its pid namespace (/proc/PID/ns/pid: "pid:[N]"); null where unreadable. */
  pid_namespace: number | null;
}
