// Where the time of `gpumem-tui --json --once` goes, step by step, in one process, following the
// CLI's own path (NVML warmed up on a native thread while the modules load).
//   bun bench/startup.ts
// performance.now() counts from the process's start, so the first line is Bun's own start-up.
export {};
const marks: [string, number][] = [["bun start-up, until this script runs", performance.now()]];
let last = performance.now();
const lap = (what: string) => {
  const now = performance.now();
  marks.push([what, now - last]);
  last = now;
};
const { warmUp } = await import("../src/ffi/nvml");
lap("import src/ffi/nvml");
warmUp();
lap("dlopen libgpumem (bun:ffi), start NVML's warm-up thread");
const { SystemCollector } = await import("../src/collect/system");
lap("import the collector (overlaps the warm-up)");
const c = new SystemCollector();
lap("SystemCollector: wait for NVML init and warm-up");
const doc = c.sample(Date.now(), { oneShot: true });
lap(`collector.sample() of ${doc.devices.length} device(s)`);
const text = JSON.stringify(doc);
lap(`JSON.stringify (${text.length} bytes)`);
c.close({ fast: true });
lap("close (no nvmlShutdown: the process exits)");
marks.push(["total", performance.now()]);
for (const [what, ms] of marks) console.log(`${ms.toFixed(2).padStart(8)} ms  ${what}`);
