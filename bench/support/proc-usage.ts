// A process's own CPU and memory over a while, from /proc, as the monitor's benchmarks read them.
import { readdirSync, readFileSync } from "node:fs";

const TICK = 100; // clock ticks a second on Linux (getconf CLK_TCK)

/** Each thread's CPU ticks by its name, digits dropped ("JITWorker", "HeapHelper", "bun": the
 *  engine's compiler, its collector's helpers, the JavaScript thread); threads gone meanwhile are
 *  not counted. */
function threadTicks(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tasks) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/stat`, "utf8");
      const name = st.slice(st.indexOf("(") + 1, st.lastIndexOf(")")).replace(/\d+/g, "");
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      out.set(name, (out.get(name) ?? 0) + Number(f[11]) + Number(f[12]));
    } catch {
      // the thread ended between the listing and its read
    }
  }
  return out;
}

/** `pid`'s CPU (utime + stime) over `seconds`, sampled once a second for its largest resident set:
 *  the share of one core, the largest VmRSS in bytes, the wall time it took, and the share of the
 *  threads that ran by their names (`threads`: the engine's compiler is "JITWorker"; what threads
 *  that ended meanwhile ran and the threads' rounding, "(ended threads, rounding)"). */
export async function procUsage(
  pid: number,
  seconds: number,
  windowS = 0,
): Promise<{ cpuPercent: number; maxRssBytes: number; wallS: number; threads: Record<string, number>; windows?: Record<string, number>[] }> {
  const cpuTicks = () => {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const t0 = threadTicks(pid);
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
  const c0 = cpuTicks();
  const w0 = performance.now();
  let maxRssBytes = 0;
  // With windowS, each window's threads too: whether the compiler's share dies down or stays.
  const windows: Record<string, number>[] = [];
  let wt = t0;
  for (let i = 0; i < seconds; i++) {
    await Bun.sleep(1000);
    maxRssBytes = Math.max(maxRssBytes, rss());
    if (windowS > 0 && (i + 1) % windowS === 0) {
      const now = threadTicks(pid);
      windows.push(shares(wt, now, windowS));
      wt = now;
    }
  }
  const wallS = (performance.now() - w0) / 1000;
  const cpuPercent = (((cpuTicks() - c0) / TICK) * 100) / wallS;
  const threads = shares(t0, threadTicks(pid), wallS);
  // The process's own count also holds what threads that ended inside the window ran, which no
  // thread's count says any more, and it is not cut to whole ticks thread by thread (each thread's
  // count loses up to a tick at either end): the rest said apart, so that a figure's parts add up
  // (0.04-0.8% of a core of a busy screen's on the H200 over 20 s; a tick a thread is 0.05%).
  const rest = +(cpuPercent - Object.values(threads).reduce((a, b) => a + b, 0)).toFixed(2);
  if (rest >= 0.05) threads["(ended threads, rounding)"] = rest;
  return windowS > 0 ? { cpuPercent, maxRssBytes, wallS, threads, windows } : { cpuPercent, maxRssBytes, wallS, threads };
}

/** Each thread name's share of a core between two readings `wallS` apart (those that ran). */
function shares(before: Map<string, number>, after: Map<string, number>, wallS: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, ticks] of after) if (ticks > (before.get(name) ?? 0)) out[name] = +((((ticks - (before.get(name) ?? 0)) / TICK) * 100) / wallS).toFixed(2);
  return out;
}
