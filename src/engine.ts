// The engine settings a monitor that runs a while starts itself with: JavaScriptCore reads its
// options (BUN_JSC_*) only as the process starts, so the entry starts the process again, in place
// (execve: the same pid, terminal and descriptors), with them in its environment, and the new
// process takes them out again before it runs anything, so nothing it starts inherits them (a
// program under `run` may be a Bun program of its own): out of process.env, which every child of
// the monitor is given (Bun.spawn's own default is the environment the process started with).
//
// On an H200 following a busy GPT-2 on the Overview, 100 s after 40 (bench/gpu-parts/knobs.sh,
// bench/results/gpu-2026-11-29g): 3.63-3.76% of a core as Bun starts, 3.06% with the FTL tier's
// threshold ten times as high (code run once a frame, React's and Ink's, stops being compiled a
// fourth time a minute or more into the run; the per-record loop, a loop of millions of iterations,
// still reaches that tier in its first seconds) and 3.46% without the concurrent collector (a heap
// of ~100 MB collected at once by the thread that made it, its helpers' start and stop spared;
// 1.79 against 1.94% for `--json`). GPUMEM_TUI_ENGINE=off, or Bun under a profiler: Bun's own settings.

/** The settings, each left as the user set it where the environment already holds it. */
export const ENGINE_SETTINGS: Readonly<Record<string, string>> = {
  BUN_JSC_thresholdForFTLOptimizeAfterWarmUp: "640000",
  BUN_JSC_useConcurrentGC: "0",
};

/** Names the settings this process was started with (a comma-separated list), or "off". */
const MARK = "GPUMEM_TUI_ENGINE";

/** Bun's flags that start a profiler or an inspector: its thread signals the JavaScript thread, and
 *  a signal still pending at execve outlives it and kills the new process before its handlers are
 *  in place (Bun under --cpu-prof, started again: status 158). Such a monitor keeps Bun's settings. */
const SIGNALLING = /^--(cpu-prof|heap-prof|inspect)/;

/**
 * Start this process again with ENGINE_SETTINGS (returns only where it does not: already started
 * with them, turned off, nothing to add, or no execve); in the process started with them, take them
 * out of its environment. Call it first thing, before any thread or file is opened.
 */
export function startWithEngineSettings(env: NodeJS.ProcessEnv = process.env): void {
  const mark = env[MARK];
  if (mark === "off") return;
  if (mark !== undefined) {
    for (const name of mark.split(",")) if (Object.hasOwn(ENGINE_SETTINGS, name)) delete env[name];
    delete env[MARK];
    return;
  }
  const added = Object.keys(ENGINE_SETTINGS).filter((name) => env[name] === undefined);
  if (added.length === 0 || typeof process.execve !== "function" || process.execArgv.some((a) => SIGNALLING.test(a))) return;
  // The script Bun was given (argv[1]); a program built into one executable (bun build --compile)
  // names its own in Bun's virtual files and takes no script: such a one keeps Bun's settings.
  const script = process.argv[1];
  if (script === undefined || script.startsWith("/$bunfs/")) return;
  const next: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) next[k] = v;
  for (const name of added) next[name] = ENGINE_SETTINGS[name]!;
  next[MARK] = added.join(",");
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, script, ...process.argv.slice(2)], next);
  } catch {
    // not started again (the environment too large, the executable gone): Bun's own settings
  }
}
