// Where the time of `gpumem-tui --json --once` goes, step by step, in one process, following the
// CLI's own path (src/cli.ts): NVML's warm-up thread first (this file's one static import, as it is
// the entry's), then the modules (asked for together, as the entry asks for a one-shot's), the
// agents' directory, the first part of the thread's sample and a document of it, the wait for that
// thread, and the document of the sample it kept.
//   bun bench/startup.ts                   from the sources, one run
//   bun bench/startup.ts --bundle [RUNS]   this file bundled as `bun run build:bundle` bundles the
//                                          CLI (its modules as the package runs them: the figure
//                                          that counts), RUNS fresh processes (default 10): each
//                                          run's steps, then each step's median, and the process's
//                                          own start and exit (its wall time, spawn to exit, less
//                                          the steps)
// performance.now() counts from the process's start, so the first line is Bun's own start-up.
import { warmUp } from "../src/ffi/warm-up"; // the one static import: the steps' first line is the CLI's

const args = process.argv.slice(2);
if (args[0] === "--bundle") await bundled(Number(args[1] ?? 10));
else await steps();

async function steps(): Promise<void> {
  const marks: [string, number][] = [["bun start-up and this file's static imports (src/ffi/warm-up, the CLI's one)", performance.now()]];
  let last = performance.now();
  const lap = (what: string) => {
    const now = performance.now();
    marks.push([what, now - last]);
    last = now;
  };
  warmUp({ oneShot: true });
  lap("load libgpumem (process.dlopen, its Node-API entry), start NVML's warm-up thread");
  const [{ parseCli }, , , { Machine }, { Session }, { serialize }, { liveModels }] = await Promise.all([
    import("../src/commands/options"),
    import("../src/commands/main"),
    import("../src/commands/monitor"),
    import("../src/collect/machine"),
    import("../src/collect/session"),
    import("../src/headless/stream"),
    import("../src/commands/live-models"),
  ]);
  lap("import the command line, the monitor command, the machine, the session, the JSON writer (overlaps the warm-up)");
  const opts = parseCli(["--json", "--once"]);
  lap("parse the command line (overlaps)");
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
    lap(`session.tick(): bind libgpumem (bun:ffi), wait for the warm-up's first part (${e ? `${e.samples.length} device(s), ${e.samples.reduce((n, s) => n + s.processes.length, 0)} process(es)` : "none"})`);
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
}

/** This file bundled with build:bundle's own options (package.json, defined there once), run `runs`
 *  times: libgpumem is the one the sources find (the bundle's folder is not the package's). */
async function bundled(runs: number): Promise<void> {
  const [{ mkdtempSync, rmSync }, { tmpdir }, { join }] = await Promise.all([import("node:fs"), import("node:os"), import("node:path")]);
  const root = join(import.meta.dir, "..");
  const pkg = (await import("../package.json")).default as { scripts: Record<string, string> };
  const { findLibrary } = await import("../src/ffi/locate");
  const lib = findLibrary();
  if (!("path" in lib)) throw new Error(`no libgpumem.so to load: ${lib.error} (bun cuda/build.ts --install)`);
  const out = mkdtempSync(join(tmpdir(), "startup-bundle-"));
  const script = pkg.scripts["build:bundle"]!;
  const build = script.replace(/^rm -rf dist && /, "").replace(" src/cli.ts ", " bench/startup.ts ").replace("--outdir dist", `--outdir ${out}`);
  if (build === script || !build.includes(`--outdir ${out}`)) throw new Error(`build:bundle changed its form: ${script}`);
  const b = Bun.spawnSync(["sh", "-c", build], { cwd: root, stdout: "pipe", stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`${build} failed: ${b.stderr}`);
  const env = { ...process.env, GPUMEM_LIB: lib.path };
  const rows = new Map<string, number[]>();
  const add = (what: string, ms: number) => rows.set(what, [...(rows.get(what) ?? []), ms]);
  Bun.spawnSync(["bun", join(out, "startup.js")], { env, stdout: "pipe", stderr: "pipe" }); // the page cache, NVML's kept constants
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const p = Bun.spawnSync(["bun", join(out, "startup.js")], { env, stdout: "pipe", stderr: "pipe" });
    const wall = performance.now() - t0;
    const text = p.stdout.toString();
    if (p.exitCode !== 0) throw new Error(`the bundled steps failed (${p.exitCode}): ${p.stderr}`);
    console.log(`run ${i + 1}: ${wall.toFixed(2)} ms spawn to exit\n${text}`);
    for (const m of text.matchAll(/^\s*([\d.]+) ms {2}(.+)$/gm)) add(m[2]!.replace(/\(\d+ bytes\)|\d+ device\(s\), \d+ process\(es\)/g, "…"), Number(m[1]));
    add("the process's start before its clock and its exit (spawn to exit, less the total)", wall - Number(/^\s*([\d.]+) ms {2}total$/m.exec(text)?.[1]));
    add("spawn to exit", wall);
  }
  rmSync(out, { recursive: true });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`medians of ${runs} runs of the bundled steps (bench/startup.ts --bundle):`);
  for (const [what, xs] of rows) console.log(`${median(xs).toFixed(2).padStart(8)} ms  ${what}`);
}
