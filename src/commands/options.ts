// The command line: what each word means, checked whole before anything runs. A usage error is
// thrown as UsageError, which the CLI prints first, in one line, with a pointer to --help.
import pkg from "../../package.json";

export const USAGE = `gpumem-tui ${pkg.version} — GPU memory, and what PyTorch does with it

usage:
  gpumem-tui [--interval MS] [--ascii]       the monitor (nvtop-style screens, PyTorch inside)
  gpumem-tui --json --once                   one JSON document of every GPU and process
  gpumem-tui --json [--interval MS]          one JSON document per line (NDJSON) until interrupted
  gpumem-tui schema                          the JSON document's JSON Schema
  gpumem-tui serve [--port 9464] [--host H]  Prometheus metrics at http://H:PORT/metrics
  gpumem-tui run [--json --output F] -- CMD  start CMD (e.g. python train.py) with the agent injected,
                                             then the monitor on it, or NDJSON samples into F
  gpumem-tui replay FILE [--speed N] [--json] a recorded ring (or a PyTorch snapshot's trace) through
                                             the model: the screens, at the recorded pace, or NDJSON
                                             states, as fast as they come, and a final state with
                                             the findings
  gpumem-tui replay FILE --snapshot OUT [--force] [--json]
                                             the recording as a PyTorch memory snapshot (.pickle)
                                             that pytorch.org/memory_viz opens
  gpumem-tui view FILE [--json]              a PyTorch memory snapshot (.pickle, optionally gzip):
                                             the screens, or its summary
  gpumem-tui attach PID [--wait] [--timeout S] [--no-monitor]
                                             start the agent inside a running PyTorch program (a
                                             torchrun launcher's pid: each rank), then the monitor
  gpumem-tui detach PID                      stop that agent: its hooks and files go

options:
  --interval MS   sampling interval in milliseconds (default 1000, at least 50, at most a day)
  --ascii         plain-ASCII charts (no braille)
  --demo          the monitor with a replay of a real training run recorded on an H100; with
                  --json, --json --once (its end) or serve: that recorded machine as the document
  --speed N       replay, --demo: N times the recorded pace (default: 1 on the screens;
                  replay --json as fast as it goes)
  --output F      run --json: where the NDJSON goes (default gpumem-tui-run.ndjson)
  --dump-dir DIR  the screens: where d writes snapshots (default: the current directory)
  --snapshot OUT  replay: write the recording, played to its end, as a memory snapshot to OUT
  --force         replay --snapshot: replace a file already at OUT (otherwise refused)
  --port N        serve: the port (default 9464)
  --host H        serve: the address to listen on (default 0.0.0.0)
  --wait          attach: wait until the program has imported torch and initialized CUDA
  --timeout S     attach: seconds to wait for the program to reach a safe point (default 5)
  --no-monitor    attach: attach, say so, and exit
  -h, --help      this help
  -v, --version   the version
`;

export class UsageError extends Error {}

/** A day: longer waits overflow the timers (2^31 ms, after which they fire at once, in a loop). */
const MAX_INTERVAL_MS = 86_400_000;

export interface Options {
  command: "monitor" | "schema" | "serve" | "replay" | "view" | "run" | "attach" | "detach" | "help" | "version";
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
  /** replay --snapshot: replace a file already at OUT. */
  force: boolean;
  dumpDir: string | undefined;
  rest: string[];
  /** attach only. */
  attach?: { wait: boolean; timeoutS: number; monitor: boolean };
}

/** The options that take a value, and how their value is named in messages. */
const VALUE_NAMES: Record<string, string> = { interval: "MS", port: "N", speed: "N", output: "F", snapshot: "OUT", host: "H", "dump-dir": "DIR", timeout: "S" };

/**
 * `--interval -5`: a negative number given to an option that takes a value is its value (node:util
 * would call it ambiguous); the option's own check then says what it takes.
 */
function joinNegativeValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    if (a.startsWith("--") && VALUE_NAMES[a.slice(2)] && next !== undefined && /^-\d/.test(next)) out.push(`${a}=${next}`), i++;
    else out.push(a);
  }
  return out;
}

/** Every option: whether it takes a value, its one-letter form, its default. */
const OPTIONS = {
  json: { value: false, default: false },
  once: { value: false, default: false },
  interval: { value: true },
  ascii: { value: false, default: false },
  demo: { value: false, default: false },
  port: { value: true },
  speed: { value: true },
  output: { value: true },
  snapshot: { value: true },
  force: { value: false, default: false },
  "dump-dir": { value: true },
  host: { value: true, default: "0.0.0.0" },
  wait: { value: false, default: false },
  timeout: { value: true },
  "no-monitor": { value: false, default: false },
  help: { value: false, short: "h", default: false },
  version: { value: false, short: "v", default: false },
} as const;

type Values = { -readonly [K in keyof typeof OPTIONS]: (typeof OPTIONS)[K] extends { value: true; default: string } ? string : (typeof OPTIONS)[K] extends { value: true } ? string | undefined : boolean };

/**
 * The words as node:util's parseArgs reads them, strictly (what this replaced: loading node:util
 * cost 1-2 ms of every start, `--json --once`'s included): `--name`, `--name=value`, `--name value`
 * (a value that looks like an option is refused: `--interval --json` is a forgotten value),
 * `-h`/`-v` and their groups, `-` a word; the last of an option given twice stands.
 */
function parseWords(args: string[]): { values: Values; positionals: string[] } {
  const values = Object.fromEntries(Object.entries(OPTIONS).map(([k, o]) => [k, "default" in o ? o.default : undefined])) as Values;
  const set = values as Record<string, string | boolean | undefined>;
  const positionals: string[] = [];
  const shorts = new Map(Object.entries(OPTIONS).flatMap(([k, o]) => ("short" in o ? [[o.short as string, k]] : [])));
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      const o = (OPTIONS as Record<string, { value: boolean }>)[name];
      if (!o) throw new UsageError(`unknown option --${name}`);
      if (!o.value) {
        if (eq >= 0) throw new UsageError(`--${name} takes no value`);
        set[name] = true;
        continue;
      }
      const next = args[i + 1];
      if (eq >= 0) set[name] = a.slice(eq + 1);
      else if (next === undefined || (next.length > 1 && next.startsWith("-"))) throw new UsageError(`--${name} needs a value: --${name} ${VALUE_NAMES[name] ?? "VALUE"}`);
      else (set[name] = next), i++;
    } else if (a.length > 1 && a.startsWith("-")) {
      for (const c of a.slice(1)) {
        const name = shorts.get(c);
        if (!name) throw new UsageError(`unknown option -${c}`);
        set[name] = true;
      }
    } else {
      positionals.push(a);
    }
  }
  return { values, positionals };
}

export function parseCli(argv: string[]): Options {
  // `run -- CMD ARGS`: everything after `--` is the program's, never ours.
  const dashes = argv.indexOf("--");
  const program = dashes >= 0 ? argv.slice(dashes + 1) : [];
  if (dashes >= 0) argv = argv.slice(0, dashes);
  const { values, positionals } = parseWords(joinNegativeValues(argv));
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
  else if (first === "attach") command = "attach";
  else if (first === "detach") command = "detach";
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
  if (values.snapshot !== undefined && speed !== undefined) throw new UsageError("--snapshot replays to the end as fast as it goes: no --speed");
  if (values.snapshot === "") throw new UsageError("--snapshot takes the path of the file to write");
  if (values.force && values.snapshot === undefined) throw new UsageError("--force goes with replay --snapshot OUT");
  const attach = attachOptions(command, rest, values);
  if (command !== "replay" && command !== "view" && command !== "attach" && command !== "detach" && rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"`);
  // With --json and serve the demo's recorded machine is the document: a jq pipeline or a dashboard
  // can be tried where there is no GPU.
  if (values.demo && command !== "monitor" && command !== "serve") throw new UsageError("--demo goes with the monitor, --json or serve");
  if (values.demo && values.once && speed !== undefined) throw new UsageError("--once --demo gives the recording's end at once: no --speed");
  const dumpDir = values["dump-dir"];
  if (dumpDir !== undefined) {
    if (values.json || !["monitor", "run", "replay", "view"].includes(command)) throw new UsageError("--dump-dir goes with the screens (the monitor, run, replay, view)");
    checkDirectory(dumpDir);
  }
  return { command, json: values.json, once: values.once, intervalMs, ascii: values.ascii, demo: values.demo, port, host: values.host, speed, output: values.output, snapshot: values.snapshot, force: values.force, dumpDir, rest: command === "run" ? program : rest, attach };
}

/** attach and detach take one PID; --wait, --timeout and --no-monitor go with attach only. */
function attachOptions(command: Options["command"], rest: string[], values: { wait?: boolean; timeout?: string; "no-monitor"?: boolean; json?: boolean }): Options["attach"] {
  const isAttach = command === "attach";
  if (!isAttach && (values.wait || values.timeout !== undefined || values["no-monitor"])) throw new UsageError("--wait, --timeout and --no-monitor go with attach");
  if (!isAttach && command !== "detach") return undefined;
  if (rest.length !== 1 || !/^\d+$/.test(rest[0]!) || Number(rest[0]) < 1) throw new UsageError(`${command} takes one PID (a process id)`);
  if (values.json) throw new UsageError(`--json does not go with ${command}`);
  if (!isAttach) return undefined;
  let timeoutS = 5;
  if (values.timeout !== undefined) {
    timeoutS = Number(values.timeout);
    if (!(timeoutS > 0) || !Number.isFinite(timeoutS) || timeoutS > 3600) throw new UsageError(`--timeout takes seconds, more than 0 and at most 3600 (got "${values.timeout}")`);
  }
  return { wait: values.wait ?? false, timeoutS, monitor: !values["no-monitor"] };
}

/** --dump-dir must name a directory this user can write into, checked before the screens open. */
function checkDirectory(dir: string): void {
  const { accessSync, constants, statSync } = require("node:fs") as typeof import("node:fs");
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new UsageError(`--dump-dir ${dir}: no such directory`);
  }
  if (!isDir) throw new UsageError(`--dump-dir ${dir} is not a directory`);
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new UsageError(`--dump-dir ${dir}: this user cannot write there`);
  }
}

/** The same data without the screens, per command that has screens. */
export const SCRIPTED: Partial<Record<Options["command"], string>> = {
  monitor: "`gpumem-tui --json --once`, or `gpumem-tui --json --interval MS` for a stream",
  run: "`gpumem-tui run --json --output F.ndjson -- CMD`",
  replay: "`gpumem-tui replay FILE --json`, or `--snapshot OUT` for memory_viz",
  view: "`gpumem-tui view FILE --json`",
};

/** Whether the command line opens the interactive screens (everything else prints and exits). */
export function opensScreens(o: Options): boolean {
  if (o.json) return false;
  if (o.command === "monitor" || o.command === "run" || o.command === "view") return true;
  return o.command === "replay" && !o.snapshot;
}

