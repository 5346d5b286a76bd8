export {};
// Where the time of `gpumem-tui --json --once` goes, step by step, in one process.
//   bun bench/startup.ts
// performance.now() counts from the process's start, so the first line is Bun's own start-up.
const marks: [string, number][] = [["bun start-up, until this script runs", performance.now()]];
let last = performance.now();
const lap = (what: string) => {
  const now = performance.now();
  marks.push([what, now - last]);
  last = now;
};
const { SystemCollector } = await import("../src/collect/system");
lap("import the collector (ffi, collect, headless)");
const { Nvml } = await import("../src/ffi/nvml");
const nvml = (() => {
  try {
    return Nvml.open();
  } catch {
    return null;
  }
})();
lap("dlopen libgpumem + nvmlInit");
const sys = nvml?.system();
lap("device count, driver version");
if (nvml && sys) for (let i = 0; i < sys.device_count; i++) nvml.sample(i);
lap(`sample ${sys?.device_count ?? 0} device(s)`);
nvml?.close();
lap("nvmlShutdown");
const c = new SystemCollector();
lap("SystemCollector (second NVML init)");
const doc = c.sample();
lap("collector.sample()");
const text = JSON.stringify(doc);
lap(`JSON.stringify (${text.length} bytes)`);
c.close();
lap("close");
for (const [what, ms] of marks) console.log(`${ms.toFixed(2).padStart(8)} ms  ${what}`);
