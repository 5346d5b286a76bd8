#!/usr/bin/env bun
// The entry. NVML's start-up (its init and the first calls of a sample: about 19 ms on an H100) is
// the longest part of `--json --once`, so the first thing this process does is start it on a
// native thread (src/ffi/warm-up.ts); the command line, the command and everything they load come
// after, by dynamic import, while that thread runs (commands/main.ts). Before that, a monitor that
// runs a while starts itself again with its engine settings (src/engine.ts, imported only there:
// a brief command line, `--json --once` first, reads nothing more before NVML starts).
import { warmUp } from "./ffi/warm-up";

/** Commands that never touch NVML; every other command line reaches it (the monitor, serve, run). */
const NO_NVML = new Set(["schema", "replay", "view", "-h", "--help", "-v", "--version"]);
/** Command lines that end at once: they start with Bun's own engine settings (src/engine.ts), not
 *  again with the monitor's (a start is a few milliseconds, `--json --once`'s whole budget). */
const BRIEF = new Set(["--once", "--snapshot", "schema", "detach", "--no-monitor", "-h", "--help", "-v", "--version"]);

/**
 * Run from the sources, the screens' .tsx files are compiled with tsconfig.json's `"jsx": "react-jsx"`
 * wherever the command starts. Bun 1.4 takes its JSX settings from the tsconfig.json (or bunfig.toml)
 * of the current directory only, not from the file's own: started from outside the checkout
 * (`cd /tmp && bun …/src/cli.ts`) with NODE_ENV unset, it compiles JSX to `jsxDEV` from
 * react/jsx-dev-runtime, while commands/screens.ts then loads React's production build, whose
 * jsx-dev-runtime has no jsxDEV ("jsxDEV… is not a function"). `jsx` from react/jsx-runtime is in
 * both of React's builds, so the screens run whichever NODE_ENV picks. No tsconfig or bunfig setting
 * can do this: neither is read from outside the current directory. The bundle (dist/) holds no .tsx:
 * build:bundle (package.json) defines NODE_ENV as "production", so its JSX and its React are both
 * production's whatever NODE_ENV the build ran under (unset, it shipped React's development build).
 */
function productionJsx(): void {
  const src = import.meta.dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  Bun.plugin({
    name: "gpumem-tui jsx",
    setup(build) {
      let tsx: Bun.Transpiler | undefined; // made at the first .tsx: the commands without screens load none
      build.onLoad({ filter: new RegExp(`^${src}/.*\\.tsx$`) }, async ({ path }) => {
        tsx ??= new Bun.Transpiler({ loader: "tsx", target: "bun", autoImportJSX: true, tsconfig: { compilerOptions: { jsx: "react-jsx" } } });
        return { contents: tsx.transformSync(await Bun.file(path).text()), loader: "js" };
      });
    },
  });
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const dashes = argv.indexOf("--"); // `run -- CMD ARGS`: the program's words are not ours
  const ours = dashes >= 0 ? argv.slice(0, dashes) : argv;
  // Read before the command line is checked (that loads more code): a wrong guess costs nothing,
  // parseCli still says what is wrong, and a monitor that is not a one-shot samples normally.
  const oneShot = ours.includes("--json") && ours.includes("--once");
  // A monitor that runs a while: started again with its engine settings, before anything else.
  if (!ours.some((a) => BRIEF.has(a))) (await import("./engine")).startWithEngineSettings();
  if (!ours.some((a) => NO_NVML.has(a))) warmUp({ oneShot });
  if (import.meta.path.endsWith(".ts")) productionJsx();
  import("./commands/main")
    .then(({ main }) => main(argv))
    .then(
      (code) => process.exit(code),
      (e) => {
        process.stderr.write(`gpumem-tui: ${e instanceof Error ? e.message : String(e)}\n`);
        process.exit(1);
      },
    );
  // A one-shot's modules, asked for together: otherwise each file asks for the next only once it
  // runs (the command line, then the monitor command, the machine, then the session and the JSON
  // writer), a chain of waits before NVML's sample is read. A failure here is main's to report.
  if (oneShot && !ours.includes("--demo")) for (const load of [() => import("./commands/monitor"), () => import("./collect/machine"), () => import("./collect/session"), () => import("./headless/stream")]) load().catch(() => {});
}
