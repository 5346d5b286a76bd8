#!/usr/bin/env bun
// Argument parsing and wiring, nothing else.
// NVML's start-up (its init and first calls: about 20 ms on an H100) is the longest part of
// `--json --once`. It starts on a native thread before anything else loads (see warmUp), so the
// only static imports are the NVML binding and what every command needs.
import pkg from "../package.json";
import { warmUp } from "./ffi/nvml";
import { writeOut } from "./headless/out";

/** Commands that never touch NVML; every other command line reaches it (the monitor, serve, run). */
const NO_NVML = new Set(["schema", "replay", "view", "-h", "--help", "-v", "--version"]);
if (import.meta.main && !process.argv.slice(2).some((a) => NO_NVML.has(a))) warmUp();

const USAGE = `gpumem-tui ${pkg.version} — GPU memory, and what PyTorch does with it

usage:
  gpumem-tui [--interval MS] [--ascii]       the monitor (nvtop-style screens, PyTorch inside)
  gpumem-tui --json --once                   one JSON document of every GPU and process
  gpumem-tui --json [--interval MS]          one JSON document per line (NDJSON) until interrupted
  gpumem-tui schema                          the JSON document's JSON Schema
  gpumem-tui serve [--port 9464] [--host H]  Prometheus metrics at http://H:PORT/metrics
  gpumem-tui run [--json --output F] -- CMD  start CMD (e.g. python train.py) with the agent injected,
                                             then the monitor on it, or NDJSON samples into F
  gpumem-tui replay FILE [--speed N] [--json] a recorded ring (or a PyTorch snapshot's trace) through
                                             the model: the screens, or NDJSON states and a final
                                             state with the findings
  gpumem-tui replay FILE --snapshot OUT      the recording as a PyTorch memory snapshot (.pickle)
                                             that pytorch.org/memory_viz opens
  gpumem-tui view FILE [--json]              a PyTorch memory snapshot (.pickle, optionally gzip):
                                             the screens, or its summary

options:
  --interval MS   sampling interval in milliseconds (default 1000, at least 50, at most a day)
  --ascii         plain-ASCII charts (no braille)
  --demo          the monitor with a replay of a real training run recorded on an H100
  --speed N       replay: N times the recorded pace (default: as fast as it goes)
  --output F      run --json: where the NDJSON goes (default gpumem-tui-run.ndjson)
  --snapshot OUT  replay: write the recording, played to its end, as a memory snapshot to OUT
  --port N        serve: the port (default 9464)
  --host H        serve: the address to listen on (default 0.0.0.0)
  -h, --help      this help
  -v, --version   the version
`;

export class UsageError extends Error {}

/** A day: longer waits overflow the timers (2^31 ms, after which they fire at once, in a loop). */
const MAX_INTERVAL_MS = 86_400_000;

export interface Options {
  command: "monitor" | "schema" | "serve" | "replay" | "view" | "run" | "help" | "version";
  json: boolean;
  once: boolean;
  intervalMs: number;
  ascii: boolean;
  demo: boolean;
  port: number;
  host: string;
  speed: number | undefined;
  output: string | undefined;
  snapshot: string | undefined;
  rest: string[];
}

export function parseCli(argv: string[]): Options {
  // `run -- CMD ARGS`: everything after `--` is the program's, never ours.
  const dashes = argv.indexOf("--");
  const program = dashes >= 0 ? argv.slice(dashes + 1) : [];
  if (dashes >= 0) argv = argv.slice(0, dashes);
  // Loaded here, after NVML's warm-up has started: node:util costs about 2 ms of start-up.
  const { parseArgs } = require("node:util") as typeof import("node:util");
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: "boolean", default: false },
        once: { type: "boolean", default: false },
        interval: { type: "string" },
        ascii: { type: "boolean", default: false },
        demo: { type: "boolean", default: false },
        port: { type: "string" },
        speed: { type: "string" },
        output: { type: "string" },
        snapshot: { type: "string" },
        host: { type: "string", default: "0.0.0.0" },
        help: { type: "boolean", short: "h", default: false },
        version: { type: "boolean", short: "v", default: false },
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { values, positionals } = parsed;
  let intervalMs = 1000;
  if (values.interval !== undefined) {
    intervalMs = Number(values.interval);
    if (!/^\d+$/.test(values.interval) || intervalMs < 50 || intervalMs > MAX_INTERVAL_MS) {
      throw new UsageError(`--interval takes a whole number of milliseconds, at least 50 and at most ${MAX_INTERVAL_MS} (a day) (got "${values.interval}")`);
    }
  }
  if (values.once && !values.json) throw new UsageError("--once goes with --json");
  if (values.once && values.interval !== undefined) throw new UsageError("--once and --interval exclude each other");
  let port = 9464;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port < 1 || port > 65535) throw new UsageError(`--port takes a port number, 1 to 65535 (got "${values.port}")`);
  }
  const [first, ...rest] = positionals;
  let command: Options["command"] = "monitor";
  if (values.help) command = "help";
  else if (values.version) command = "version";
  else if (first === "schema") command = "schema";
  else if (first === "serve") command = "serve";
  else if (first === "replay") command = "replay";
  else if (first === "run") command = "run";
  else if (first === "view") command = "view";
  else if (first !== undefined) throw new UsageError(`unknown command "${first}"`);
  if ((values.port !== undefined || argv.includes("--host")) && command !== "serve") throw new UsageError("--port and --host go with serve");
  let speed: number | undefined;
  if (values.speed !== undefined) {
    speed = Number(values.speed);
    if (command !== "replay" && !values.demo) throw new UsageError("--speed goes with replay or --demo");
    if (!(speed > 0) || !Number.isFinite(speed)) throw new UsageError(`--speed takes a positive number (got "${values.speed}")`);
  }
  if (command === "replay" && rest.length !== 1) throw new UsageError("replay takes one FILE (a recorded .ring or a snapshot)");
  if (command === "view" && rest.length !== 1) throw new UsageError("view takes one FILE (a PyTorch memory snapshot)");
  if (command === "run") {
    if (rest.length > 0 || program.length === 0) throw new UsageError("run takes its program after --: gpumem-tui run -- python train.py");
    if (values.once) throw new UsageError("--once does not go with run");
  } else if (program.length > 0) {
    throw new UsageError("only run takes a program after --");
  }
  if (values.output !== undefined && !(command === "run" && values.json)) throw new UsageError("--output goes with run --json");
  if (values.snapshot !== undefined && command !== "replay") throw new UsageError("--snapshot goes with replay");
  if (values.snapshot !== undefined && (values.json || speed !== undefined)) throw new UsageError("--snapshot replays to the end as fast as it goes: no --json, no --speed");
  if (values.snapshot === "") throw new UsageError("--snapshot takes the path of the file to write");
  if (command !== "replay" && command !== "view" && rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"`);
  if (values.demo && (command !== "monitor" || values.json)) throw new UsageError("--demo goes with the monitor");
  return { command, json: values.json, once: values.once, intervalMs, ascii: values.ascii, demo: values.demo, port, host: values.host, speed, output: values.output, snapshot: values.snapshot, rest: command === "run" ? program : rest };
}

/** The same data without the screens, per command that has screens. */
const SCRIPTED: Partial<Record<Options["command"], string>> = {
  monitor: "`gpumem-tui --json --once`, or `gpumem-tui --json --interval MS` for a stream",
  run: "`gpumem-tui run --json --output F.ndjson -- CMD`",
  replay: "`gpumem-tui replay FILE --json`, or `--snapshot OUT` for memory_viz",
  view: "`gpumem-tui view FILE --json`",
};

/**
 * The screens, with React's production build unless the user's NODE_ENV says otherwise: its
 * development build costs the monitor about a tenth more CPU and the demo a tenth more memory
 * (bench/results/tui-resources.md, both builds side by side).
 * React reads NODE_ENV once, as its modules load; a program started by `run` gets the
 * environment as it was.
 */
async function loadScreens(): Promise<typeof import("./tui/main")> {
  if (process.env.NODE_ENV !== undefined) return await import("./tui/main");
  process.env.NODE_ENV = "production";
  try {
    return await import("./tui/main");
  } finally {
    delete process.env.NODE_ENV;
  }
}

/** Whether the command line opens the interactive screens (everything else prints and exits). */
export function opensScreens(o: Options): boolean {
  if (o.json) return false;
  if (o.command === "monitor" || o.command === "run" || o.command === "view") return true;
  return o.command === "replay" && !o.snapshot;
}

async function main(argv: string[]): Promise<number> {
  let opts: Options;
  try {
    opts = parseCli(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`gpumem-tui: ${e.message}\n\n${USAGE}`);
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
  switch (opts.command) {
    case "help":
      await writeOut(USAGE);
      return 0;
    case "version":
      await writeOut(`${pkg.version}\n`);
      return 0;
    case "schema": {
      const { jsonSchema } = await import("./system/schema");
      await writeOut(`${JSON.stringify(jsonSchema(), null, 2)}\n`);
      return 0;
    }
    case "serve": {
      const { startServer } = await import("./headless/serve");
      const { SystemCollector } = await import("./collect/system");
      const { Session } = await import("./collect/session");
      const collector = new SystemCollector();
      let server;
      try {
        server = startServer(new Session(collector), { port: opts.port, hostname: opts.host });
      } catch (e) {
        collector.close();
        throw new Error(`cannot listen on ${opts.host}:${opts.port}: ${(e as Error).message}`);
      }
      process.stderr.write(`gpumem-tui: Prometheus metrics at http://${opts.host}:${server.port}/metrics\n`);
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      server.stop(true);
      collector.close();
      return 0;
    }
    case "run": {
      const { startChild } = await import("./collect/child");
      if (opts.json) {
        // The program keeps the terminal (stdin, stdout, stderr untouched); samples go to a file.
        const { SystemCollector } = await import("./collect/system");
        const { runJson } = await import("./headless/run");
        // The line profiler's results (gpumem_agent.profile) land beside the samples at exit.
        const output = opts.output ?? "gpumem-tui-run.ndjson";
        const lines = process.env.GPUMEM_PROFILE_JSON ?? `${output.replace(/\.ndjson$/, "")}.lines.json`;
        const start = () => startChild(opts.rest, { stdin: "inherit", stdout: "inherit", stderr: "inherit" }, { GPUMEM_PROFILE_JSON: lines });
        const { Session } = await import("./collect/session");
        const collector = new SystemCollector();
        try {
          return await runJson(new Session(collector), start, { output, intervalMs: opts.intervalMs });
        } finally {
          collector.close();
        }
      }
      const { runMonitorOnChild } = await loadScreens();
      return await runMonitorOnChild(opts, startChild);
    }
    case "view": {
      if (opts.json) {
        const { viewJson } = await import("./snapshot/view");
        await writeOut(`${JSON.stringify(await viewJson(opts.rest[0]!))}\n`);
        return 0;
      }
      const { runView } = await loadScreens();
      return await runView(opts.rest[0]!, opts);
    }
    case "replay": {
      const { openRecording } = await import("./collect/recording");
      const recording = await openRecording(opts.rest[0]!);
      try {
        if (opts.snapshot) {
          const { replaySnapshot } = await import("./headless/replay");
          await replaySnapshot(recording, opts.snapshot);
          return 0;
        }
        if (!opts.json) {
          const { runReplay } = await loadScreens();
          return await runReplay(recording, opts);
        }
        const { replayJson } = await import("./headless/replay");
        await replayJson(recording, { speed: opts.speed });
        return 0;
      } finally {
        recording.close();
      }
    }
    case "monitor": {
      warmUp(); // started already at load when run as a program; a second call does nothing
      const { SystemCollector } = await import("./collect/system");
      const collector = new SystemCollector();
      try {
        if (opts.json) {
          const { streamJson } = await import("./headless/stream");
          const { Session } = await import("./collect/session");
          await streamJson(new Session(collector), { once: opts.once, intervalMs: opts.intervalMs });
          return 0;
        }
        const { runMonitor } = await loadScreens();
        return await runMonitor(collector, { ...opts, speed: opts.speed });
      } finally {
        collector.close({ fast: opts.once });
      }
    }
  }
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`gpumem-tui: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
