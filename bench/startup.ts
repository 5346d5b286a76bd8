// Where the time of `gpumem-tui --json --once` goes, step by step, in one process, following the
// CLI's own path (src/cli.ts): NVML's warm-up thread first, then the modules, the agents' directory,
// the first part of the thread's sample and a document of it, the wait for that thread, and the
// document of the sample it kept.
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
const { warmUp } = await import("../src/ffi/warm-up");
lap("import src/ffi/warm-up (the CLI's one static import)");
warmUp({ oneShot: true });
lap("load libgpumem (process.dlopen, its Node-API entry), start NVML's warm-up thread");
const { parseCli } = await import("../src/commands/options");
await import("../src/commands/main");
lap("import the command line (overlaps the warm-up)");
const opts = parseCli(["--json", "--once"]);
lap("parse the command line (overlaps)");
const [{ Machine }, { Session }, { serialize }, { liveModels }] = await Promise.all([
  import("../src/collect/machine"),
  import("../src/collect/session"),
  import("../src/headless/stream"),
  import("../src/commands/live-models"),
]);
lap("import the machine, the session, the JSON writer (overlaps)");
const c = new Machine();
const session = new Session(c, liveModels({ keepTrace: false }));
c.agents.refresh();
lap("the agents' directory, as sample() reads it first (overlaps)");
// The tick in four parts, as sample() runs them: the wait for the warm-up's first part (identity,
// memory, the process lists); /proc and the document built from it; the wait for the rest of the
// warm-up (open()); the document of the whole sample. Only the last is after NVML's thread.
const { Nvml } = await import("../src/ffi/nvml");
const early = Nvml.early.bind(Nvml);
Nvml.early = () => {
  const e = early();
  lap(`session.tick(): wait for the warm-up's first part (${e ? `${e.samples.length} device(s), ${e.samples.reduce((n, s) => n + s.processes.length, 0)} process(es)` : "none"})`);
  return e;
};
const open = c.open.bind(c);
let openedAt = Number.NaN; // a sample the tick took itself would begin after this
c.open = () => {
  lap("session.tick(): /proc and a document of that first part (overlaps the rest of the warm-up)");
  open();
  lap("wait for the rest of NVML's warm-up (Nvml.open)");
  openedAt = performance.timeOrigin + performance.now();
};
const doc = session.tick(Date.now(), { oneShot: opts.once });
lap(`session.tick(), after the wait: ${doc.devices.length} device(s), ${doc.processes.length} process(es), the document`);
const text = serialize(doc);
lap(`JSON (${text.length} bytes)`);
c.close({ fast: true });
lap("close (no nvmlShutdown: the process exits)");
marks.push(["total", performance.now()]);
for (const [what, ms] of marks) console.log(`${ms.toFixed(2).padStart(8)} ms  ${what}`);
// Which sample the document holds: the warm-up's (it began before the wait ended) or a new one.
const kept = doc.time_unix_ms < Math.floor(openedAt);
const began = doc.time_unix_ms - performance.timeOrigin;
console.log(doc.devices.length === 0 ? `(no device: ${doc.reason})` : kept ? `the document holds the warm-up's sample, begun ${began.toFixed(0)} ms into the process` : "the document holds a sample taken by the tick (none kept)");
