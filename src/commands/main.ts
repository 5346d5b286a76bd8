// The command line parsed (options.ts), then the command's own file, loaded only for it. Loaded by
// src/cli.ts once NVML's warm-up thread runs: everything here overlaps NVML's start.
import pkg from "../../package.json";
import { writeOut } from "../headless/out";
import { opensScreens, parseCli, SCRIPTED, USAGE, UsageError, type Options } from "./options";

export async function main(argv: string[]): Promise<number> {
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
  // The file first: "no such file" is the answer to a wrong path, whatever the terminal.
  const unreadable = inputProblem(opts);
  if (unreadable) return (process.stderr.write(`gpumem-tui: ${unreadable}\n`), 1);
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

/** Why the FILE of `view` or `replay` cannot be read (no such file, a directory, no permission), in
 *  the readers' own words; null where it opens (what it holds is the reader's to judge). */
function inputProblem(opts: Options): string | null {
  if (opts.command !== "view" && opts.command !== "replay") return null;
  const { openRegular } = require("../snapshot/input-file") as typeof import("../snapshot/input-file");
  try {
    require("node:fs").closeSync(openRegular(opts.rest[0]!, opts.command === "view" ? "snapshot" : "recording").fd);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Each command's file, loaded only when it runs. */
const COMMANDS: Record<Exclude<Options["command"], "help" | "version">, () => Promise<{ command: (o: Options) => Promise<number> }>> = {
  monitor: () => import("./monitor"),
  schema: () => import("./schema"),
  serve: () => import("./serve"),
  run: () => import("./run"),
  view: () => import("./view"),
  replay: () => import("./replay"),
  attach: () => import("./attach"),
  detach: () => import("./detach"),
};
