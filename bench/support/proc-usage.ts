// A process's own CPU and memory over a while, from /proc, as the monitor's benchmarks read them.
import { readFileSync } from "node:fs";

const TICK = 100; // clock ticks a second on Linux (getconf CLK_TCK)

/** `pid`'s CPU (utime + stime) over `seconds`, sampled once a second for its largest resident set:
 *  the share of one core, the largest VmRSS in bytes, and the wall time it took. */
export async function procUsage(pid: number, seconds: number): Promise<{ cpuPercent: number; maxRssBytes: number; wallS: number }> {
  const cpuTicks = () => {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
  const c0 = cpuTicks();
  const w0 = performance.now();
  let maxRssBytes = 0;
  for (let i = 0; i < seconds; i++) {
    await Bun.sleep(1000);
    maxRssBytes = Math.max(maxRssBytes, rss());
  }
  const wallS = (performance.now() - w0) / 1000;
  return { cpuPercent: (((cpuTicks() - c0) / TICK) * 100) / wallS, maxRssBytes, wallS };
}
