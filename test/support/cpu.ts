// Where a test run's CPU goes, file by file (GPUMEM_TEST_CPU_REPORT=FILE, read by
// bench/test-time.ts): the suite's wall on two cores is bounded by its CPU, and /usr/bin/time
// misses what runs under tmux (the panes are the tmux server's children, not the test's).
import { appendFileSync, readFileSync } from "node:fs";

const TICKS_PER_S = 100; // Linux's USER_HZ, what /proc/PID/stat counts in

/** CPU seconds of `pid` and of the children it has reaped (utime, stime, cutime, cstime). */
export function cpuSeconds(pid: number | "self" = "self"): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TICKS_PER_S;
  } catch {
    return 0;
  }
}

/** One line of the report: `what` (a file, or a file's tmux server), its CPU and wall seconds. */
export function reportCpu(what: string, cpu: number, wall: number): void {
  const file = process.env.GPUMEM_TEST_CPU_REPORT;
  if (file) appendFileSync(file, `${JSON.stringify({ what, cpu: Number(cpu.toFixed(2)), wall: Number(wall.toFixed(2)), pid: process.pid, end_unix_ms: Date.now() })}\n`);
}
