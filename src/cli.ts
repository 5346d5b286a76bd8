#!/usr/bin/env bun
// The entry. NVML's start-up (its init and the first calls of a sample: about 19 ms on an H100) is
// the longest part of `--json --once`, so the first thing this process does is start it on a
// native thread (src/ffi/warm-up.ts, the one static import); the command line, the command and
// everything they load come after, by dynamic import, while that thread runs (commands/main.ts).
import { warmUp } from "./ffi/warm-up";

/** Commands that never touch NVML; every other command line reaches it (the monitor, serve, run). */
const NO_NVML = new Set(["schema", "replay", "view", "-h", "--help", "-v", "--version"]);

if (import.meta.main) {
  const argv = process.argv.slice(2);
  const dashes = argv.indexOf("--"); // `run -- CMD ARGS`: the program's words are not ours
  const ours = dashes >= 0 ? argv.slice(0, dashes) : argv;
  // Read before the command line is checked (that loads more code): a wrong guess costs nothing,
  // parseCli still says what is wrong, and a monitor that is not a one-shot samples normally.
  if (!ours.some((a) => NO_NVML.has(a))) warmUp({ oneShot: ours.includes("--json") && ours.includes("--once") });
  import("./commands/main")
    .then(({ main }) => main(argv))
    .then(
      (code) => process.exit(code),
      (e) => {
        process.stderr.write(`gpumem-tui: ${e instanceof Error ? e.message : String(e)}\n`);
        process.exit(1);
      },
    );
}
