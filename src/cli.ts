#!/usr/bin/env bun
// Wiring, nothing else: the command line parsed (src/commands/options.ts), then the command's own
// file (src/commands/), loaded only for it.
// NVML's start-up (its init and first calls: about 20 ms on an H100) is the longest part of
// `--json --once`. It starts on a native thread before anything else loads (see warmUp), so the
// only static imports are the NVML binding and what every command needs.
import pkg from "../package.json";
import { warmUp } from "./ffi/nvml";
import { writeOut } from "./headless/out";
import { opensScreens, parseCli, SCRIPTED, USAGE, UsageError, type Options } from "./commands/options";

/** Commands that never touch NVML; every other command line reaches it (the monitor, serve, run). */
const NO_NVML = new Set(["schema", "replay", "view", "-h", "--help", "-v", "--version"]);
if (import.meta.main && !process.argv.slice(2).some((a) => NO_NVML.has(a))) warmUp();

async function main(argv: string[]): Promise<number> {
  let opts: Options;
  try {
    opts = parseCli(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      // What is wrong first, and where the usage is: 31 lines of help would scroll the error away.
      process.stderr.write(`gpumem-tui: ${e.message}\nRun 'gpumem-tui --help' for the usage.\n`);
      return 2;
    }
    throw e;
  }
  if (opensScreens(opts)) {
    const { isatty } = require("node:tty") as typeof import("node:tty");
    if (!(isatty(0) && isatty(1))) {
      // Ink would stop on raw mode (stdin) or draw nothing until exit (stdout): say why instead.
      const which = isatty(0) ? "standard output is" : isatty(1) ? "standard input is" : "standard input and output are";
      process.stderr.write(`gpumem-tui: the screens need a terminal, and ${which} not one here; for scripts: ${SCRIPTED[opts.command]}\n`);
      return 2;
    }
  }
  if (opts.command === "help") return (await writeOut(USAGE), 0);
  if (opts.command === "version") return (await writeOut(`${pkg.version}\n`), 0);
  const { command } = await COMMANDS[opts.command]();
  return await command(opts);
}

/** Each command's file, loaded only when it runs. */
const COMMANDS: Record<Exclude<Options["command"], "help" | "version">, () => Promise<{ command: (o: Options) => Promise<number> }>> = {
  monitor: () => import("./commands/monitor"),
  schema: () => import("./commands/schema"),
  serve: () => import("./commands/serve"),
  run: () => import("./commands/run"),
  view: () => import("./commands/view"),
  replay: () => import("./commands/replay"),
};

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`gpumem-tui: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
