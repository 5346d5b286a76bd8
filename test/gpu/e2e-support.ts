// What the GPU end-to-end drivers (test/gpu/e2e-gpu.ts, test/gpu/e2e-hf.ts) share: what this machine
// has (GPUs as the monitor sees them, a Python, a tmux that can open a pane), a private tmux server
// to drive the screens in, processes from /proc, and byte figures as the screens print them.
import { appendFileSync, closeSync, existsSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Document } from "../../src/system/schema";

export const ROOT = resolve(import.meta.dir, "..", "..");
export const CLI = join(ROOT, "src", "cli.ts");
export const BUN = process.execPath;

export const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export function lastLine(s: string): string {
  return s.trim().split("\n").filter(Boolean).pop() ?? "";
}

// ---- what this machine has -------------------------------------------------------------------------

/** The GPUs as the monitor itself sees them (`gpumem-tui --json --once`); `missing` says why none. */
export function probeGpus(): { gpus: string[]; driver: string | null; count: number; missing: string | null } {
  const once = Bun.spawnSync([BUN, CLI, "--json", "--once"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  try {
    const doc = JSON.parse(once.stdout.toString()) as Document;
    const gpus = doc.devices.map((d) => `${d.index}: ${d.name ?? "?"} (${d.uuid ?? "?"})`);
    const missing = doc.devices.length === 0 ? `no NVIDIA GPU: ${doc.reason ?? "NVML lists no devices"} (gpumem-tui --json --once)` : null;
    return { gpus, driver: doc.driver_version, count: doc.devices.length, missing };
  } catch {
    return { gpus: [], driver: null, count: 0, missing: `no NVIDIA GPU: \`gpumem-tui --json --once\` failed (exit ${once.exitCode}): ${lastLine(once.stderr.toString()) || "no output"}` };
  }
}

/** The interpreter named PYTHON (a path or a name on PATH), or null. */
export function findPython(name: string): string | null {
  return name.includes("/") ? (existsSync(name) ? name : null) : Bun.which(name);
}

/** tmux leaves a private server's socket file behind after kill-server: removed with it. */
export function killServer(tmux: string, socket: string): void {
  Bun.spawnSync([tmux, "-L", socket, "-f", "/dev/null", "kill-server"], { stdout: "ignore", stderr: "ignore" });
  rmSync(join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
}

export function probeTmux(tmux: string): string | null {
  // A private server with no user config, as the runs use; a sandbox without /dev/pts has
  // tmux but cannot open a pane.
  const socket = `gpumem-e2e-probe-${process.pid}`;
  const t = (...a: string[]) => Bun.spawnSync([tmux, "-L", socket, "-f", "/dev/null", ...a], { stdout: "pipe", stderr: "pipe" });
  const r = t("new-session", "-d", "-s", "probe", "-x", "40", "-y", "5", "/bin/sh", "-c", "echo tmux-pane-ok; sleep 30");
  if (r.exitCode !== 0) return `tmux cannot open a pane here: ${r.stderr.toString().trim() || "exit status non-zero"}`;
  try {
    for (let i = 0; i < 50; i++) {
      if (t("capture-pane", "-p", "-t", "probe").stdout.toString().includes("tmux-pane-ok")) return null;
      Bun.sleepSync(100);
    }
    return "tmux started a pane but /bin/sh printed nothing in it within 5 s";
  } finally {
    killServer(tmux, socket);
  }
}

/** tmux on PATH and a pane it can open: its path and version, or what is missing. */
export function findTmux(): { tmux: string | null; version: string | null; missing: string | null } {
  const tmux = Bun.which("tmux");
  if (!tmux) return { tmux: null, version: null, missing: "no tmux: install it (apt install tmux)" };
  const version = Bun.spawnSync([tmux, "-V"], { stdout: "pipe" }).stdout.toString().trim();
  const why = probeTmux(tmux);
  return { tmux, version, missing: why ? `no usable tmux: ${why}` : null };
}

export function gitCommit(): string | null {
  const git = Bun.which("git") ? Bun.spawnSync(["git", "-C", ROOT, "describe", "--always", "--dirty"], { stdout: "pipe", stderr: "pipe" }) : null;
  return git?.exitCode === 0 ? git.stdout.toString().trim() : null;
}

// ---- a private tmux server ---------------------------------------------------------------------------

export class Tmux {
  constructor(
    readonly bin: string,
    readonly socket: string,
  ) {}

  run(...a: string[]) {
    const r = Bun.spawnSync([this.bin, "-L", this.socket, "-f", "/dev/null", ...a], { stdout: "pipe", stderr: "pipe" });
    return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString().trim() };
  }
  pane(s: string): string {
    return this.run("capture-pane", "-p", "-t", s).out;
  }
  keys(s: string, ...k: string[]) {
    return this.run("send-keys", "-t", s, ...k);
  }
  /** Characters typed as they are (no key names). */
  type(s: string, text: string) {
    return this.run("send-keys", "-t", s, "-l", text);
  }
  /** /bin/sh runs `script` in a detached session; the pane stays after it ends. */
  start(name: string, cols: number, rows: number, script: string): void {
    const r = this.run("new-session", "-d", "-s", name, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", script);
    if (!r.ok) throw new Error(`tmux new-session failed: ${r.err}`);
  }
  /** The pid of the pane's first process (the /bin/sh that runs the script). */
  panePid(s: string): number | null {
    const n = Number(this.run("list-panes", "-t", s, "-F", "#{pane_pid}").out.trim().split("\n")[0]);
    return n > 0 ? n : null;
  }
  async until(s: string, what: string | RegExp | ((text: string) => boolean), timeoutMs: number, label = String(what)): Promise<string> {
    const t0 = Date.now();
    for (;;) {
      const text = this.pane(s);
      const hit = typeof what === "string" ? text.includes(what) : what instanceof RegExp ? what.test(text) : what(text);
      if (hit) return text;
      if (Date.now() - t0 > timeoutMs) throw new Error(`never saw ${label} within ${timeoutMs / 1000} s; the pane:\n${text.trimEnd()}`);
      await Bun.sleep(200);
    }
  }
  kill(): void {
    killServer(this.bin, this.socket);
  }
}

export async function waitFor<T>(fn: () => T | null | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await Bun.sleep(250);
  }
}

// ---- processes ---------------------------------------------------------------------------------------

function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

export function alive(pid: number): boolean {
  const f = statFields(pid);
  return !!f && f[0] !== "Z";
}

export function ppid(pid: number): number | null {
  const f = statFields(pid);
  return f ? Number(f[1]) : null;
}

export function children(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) if (/^\d+$/.test(name) && ppid(Number(name)) === pid) out.push(Number(name));
  return out.sort((a, b) => a - b);
}

let clockTicks = 0;
/** A process's own CPU time (user + system, seconds) and resident memory (bytes), or null once gone. */
export function usage(pid: number): { cpu_s: number; rss_bytes: number } | null {
  clockTicks ||= Number(Bun.spawnSync(["getconf", "CLK_TCK"], { stdout: "pipe", stderr: "ignore" }).stdout.toString().trim()) || 100;
  const f = statFields(pid);
  if (!f) return null;
  let rss = Number.NaN;
  try {
    rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) * 1024;
  } catch {
    return null;
  }
  return { cpu_s: (Number(f[11]) + Number(f[12])) / clockTicks, rss_bytes: rss };
}

// ---- figures -----------------------------------------------------------------------------------------

export const UNITS: Record<string, number> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40 };
export const BYTES = String.raw`-?\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB)`;
export function parseBytes(s: string): number {
  const [v, u] = s.trim().split(" ");
  return Number(v) * (UNITS[u ?? "B"] ?? Number.NaN);
}
export const mib = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
export const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : Number.NaN);

/** A figure for a report: large byte counts with MiB beside them. */
export function show(v: unknown): string {
  if (typeof v === "number" && Number.isInteger(v) && Math.abs(v) >= 2 ** 20) return `${v} (${mib(v)})`;
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

// ---- runs of parts, each bounded, their checks and what they leave --------------------------------

const T0 = Date.now();
/** A progress line: wall clock and seconds since the start. */
export function say(msg: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} +${((Date.now() - T0) / 1000).toFixed(1).padStart(5)}s ${msg}\n`);
}

export interface Result {
  part: string;
  name: string;
  title: string;
  passed: boolean;
  failures: string[];
  figures: Record<string, unknown>;
}

const LIVE = new Set<Bun.Subprocess>();

/** A child run to its end or stopped at its deadline (SIGTERM, which `gpumem-tui run` passes on to
 *  its program, then SIGKILL); its output piped (and returned) or into a file (`file`: stdout, and
 *  stderr too unless `stderr: "pipe"`). */
export async function bounded(argv: string[], opts: { env?: Record<string, string>; timeoutMs: number; file?: string; stderr?: "pipe"; cwd?: string }) {
  const t0 = performance.now();
  const fd = opts.file ? openSync(opts.file, "w", 0o644) : null;
  const errTo = fd === null || opts.stderr === "pipe" ? "pipe" : fd;
  const proc = Bun.spawn(argv, { cwd: opts.cwd ?? ROOT, env: opts.env, stdin: "ignore", stdout: fd ?? "pipe", stderr: errTo });
  LIVE.add(proc);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGTERM");
    setTimeout(() => proc.kill("SIGKILL"), 5000).unref();
  }, Math.max(1, opts.timeoutMs));
  const text = (s: unknown) => (s instanceof ReadableStream ? new Response(s).text() : Promise.resolve(""));
  const [stdout, stderr, code] = await Promise.all([text(proc.stdout), text(proc.stderr), proc.exited]);
  clearTimeout(timer);
  LIVE.delete(proc);
  if (fd !== null) closeSync(fd);
  return { code, timedOut, out: stdout, err: stderr, seconds: +((performance.now() - t0) / 1000).toFixed(1) };
}

/** Every child of `bounded` still running: SIGTERM, up to 3 s to end, then SIGKILL. */
export function stopChildren(): void {
  for (const p of LIVE) p.kill("SIGTERM");
  for (let i = 0; i < 30 && [...LIVE].some((p) => p.exitCode === null && p.signalCode === null); i++) Bun.sleepSync(100);
  for (const p of LIVE) p.kill("SIGKILL");
}

/** SIGKILL to a pid of ours that is still alive. */
export function kill(pid: number): void {
  if (alive(pid)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

/** One part of a run: its checks, the processes and tmux sessions it started (stopped at its end). */
export class Part {
  readonly results: Result[] = [];
  readonly commands: string[] = [];
  readonly pids: number[] = [];
  readonly sessions: string[] = [];
  /** Agent directories it made: the programs with an agent in them are its own. */
  readonly dirs: string[] = [];
  readonly figures: Record<string, unknown> = {};
  readonly started = Date.now();
  /** Unix seconds that `since()` counts from (a part sets it to its training's first step). */
  zero = Date.now() / 1000;
  constructor(
    readonly id: string,
    readonly deadline: number,
  ) {}
  since(): number {
    return +(Date.now() / 1000 - this.zero).toFixed(1);
  }
  left(): number {
    return Math.max(0, this.deadline - Date.now());
  }
  /** A wait bounded by what the part has left. */
  ms(want: number): number {
    return Math.max(1, Math.min(want, this.left() - 2000));
  }
  log(msg: string): void {
    say(`[${this.id}] ${msg}`);
  }
  command(cmd: string): void {
    this.commands.push(cmd);
    this.log(`$ ${cmd}`);
  }
  check(name: string, title: string, failures: string[], figures: Record<string, unknown> = {}): boolean {
    const passed = failures.length === 0;
    this.results.push({ part: this.id, name: `${this.id}.${name}`, title, passed, failures, figures });
    this.log(`${passed ? "PASS" : "FAIL"} ${this.id}.${name}${passed ? "" : `: ${failures[0]?.split("\n")[0]}`}`);
    return passed;
  }
}

/** Runs `fn` for at most `budgetMs`; what it threw, or its running out of time, is a failed check. */
export async function runPart(id: string, title: string, budgetMs: number, fn: (p: Part) => Promise<void>, stop: (p: Part) => void): Promise<Part> {
  const p = new Part(id, Date.now() + budgetMs);
  p.log(`${title} (at most ${Math.round(budgetMs / 1000)} s)`);
  let timer: Timer | undefined;
  const run = fn(p);
  run.catch(() => {});
  try {
    await Promise.race([run, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`the part ran out of its ${Math.round(budgetMs / 1000)} s`)), budgetMs)))]);
  } catch (e) {
    p.check("run", `${title}: ran to its end`, [(e as Error).message]);
  } finally {
    clearTimeout(timer);
    stop(p);
  }
  return p;
}

/** Texts kept in one file, each under a header line (the run brings back few files). */
export class Sections {
  constructor(
    readonly path: string,
    readonly maxBytes = 1 << 20,
  ) {
    writeFileSync(path, "");
  }
  add(title: string, text: string): void {
    const body = text.length > this.maxBytes ? `${text.slice(0, this.maxBytes)}\n[… ${text.length - this.maxBytes} more characters left out]\n` : text;
    appendFileSync(this.path, `===== ${title} =====\n${body}${body.endsWith("\n") ? "" : "\n"}`);
  }
}

/** JSON lines of a file, those that parse (a line being written is skipped). */
export function jsonLines<T>(path: string): T[] {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  const out: T[] = [];
  for (const l of text.split("\n")) {
    if (!l.trim()) continue;
    try {
      out.push(JSON.parse(l) as T);
    } catch {
      // partial
    }
  }
  return out;
}

export function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

// ---- torch's own figures, and what the monitor reads ---------------------------------------------

/** torch, its CUDA and (optionally) other modules' versions in `py`; `missing` says what lacks. */
export function probeTorch(py: string, env: Record<string, string>, modules: string[] = []): { info: Record<string, unknown>; missing: string[] } {
  const script = [
    "import json, importlib",
    "r = {}",
    "try:",
    "    import torch",
    "    r.update(torch=torch.__version__, torch_cuda=torch.version.cuda, available=torch.cuda.is_available())",
    "    r['torch_gpus'] = torch.cuda.device_count() if r['available'] else 0",
    "except Exception as e:",
    "    r['torch_error'] = '%s: %s' % (type(e).__name__, e)",
    `for m in ${JSON.stringify(modules)}:`,
    "    try:",
    "        r[m] = importlib.import_module(m).__version__",
    "    except Exception as e:",
    "        r[m + '_error'] = '%s: %s' % (type(e).__name__, e)",
    "print(json.dumps(r))",
  ].join("\n");
  const p = Bun.spawnSync([py, "-c", script], { env, stdout: "pipe", stderr: "pipe" });
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(lastLine(p.stdout.toString()));
  } catch {
    r = { torch_error: lastLine(p.stderr.toString()) || `exit status ${p.exitCode}` };
  }
  const missing: string[] = [];
  if (r.torch_error) missing.push(`no torch: \`${py} -c "import torch"\` failed: ${r.torch_error}`);
  else if (!r.available) missing.push(`no torch with CUDA: torch ${r.torch} (CUDA ${r.torch_cuda ?? "none"}) sees no GPU`);
  for (const m of modules) if (r[`${m}_error`]) missing.push(`no ${m}: \`${py} -c "import ${m}"\` failed: ${r[`${m}_error`]}`);
  const info: Record<string, unknown> = { python: py, torch: r.torch ?? null, torch_cuda: r.torch_cuda ?? null, torch_gpus: r.torch_gpus ?? null };
  for (const m of modules) info[m] = r[m] ?? null;
  return { info, missing };
}

/** A line of test/gpu/hf_gpt2.py --facts: torch's figures after an optimizer step (or an OOM, or at exit). */
export interface Fact {
  step?: number;
  final?: boolean;
  oom?: boolean;
  memory_allocated: number;
  memory_reserved: number;
  max_memory_allocated: number;
  num_alloc: number;
  time: number;
  device: number;
  num_ooms?: number;
  steps?: number;
  pid?: number;
  steps_per_second?: number;
}
export const factSteps = (path: string) => jsonLines<Fact>(path).filter((f) => f.step !== undefined && f.oom === undefined);
export const factFinal = (path: string) => jsonLines<Fact>(path).find((f) => f.final);

/** The monitor's allocated at `tSec` beside torch's: between half the nearest step boundary's and the peak so far. */
export function againstFacts(facts: Fact[], tSec: number, allocated: number) {
  if (!facts.length) return { ok: false, why: "no facts" };
  const near = facts.reduce((a, b) => (Math.abs(b.time - tSec) < Math.abs(a.time - tSec) ? b : a));
  const peak = Math.max(...facts.filter((f) => f.time <= tSec + 1).map((f) => f.max_memory_allocated), near.max_memory_allocated);
  const ok = allocated >= 0.5 * near.memory_allocated && allocated <= peak * 1.01 + 2 ** 20;
  return { ok, step: near.step, allocated, torch_allocated_at_step: near.memory_allocated, difference: allocated - near.memory_allocated, torch_peak: peak };
}

/** A ring's header as the monitor reads it (src/ffi/ring.ts), or null. */
export function ringHeader(path: string): { write_index: number; capacity: number; n_alloc: number | null } | null {
  try {
    const { openRing } = require("../../src/ffi/ring") as typeof import("../../src/ffi/ring");
    const ring = openRing(path);
    try {
      const h = ring.header();
      return { write_index: h.write_index, capacity: h.capacity, n_alloc: h.totals[0]?.n_alloc ?? null };
    } finally {
      ring.close();
    }
  } catch {
    return null;
  }
}

// ---- the report -----------------------------------------------------------------------------------

export function writeReport(out: string, r: { title: string; command: string; machine: Record<string, unknown>; results: Result[]; extra: Record<string, unknown>; commands: string[]; footer: string }): void {
  const { machine: m, results } = r;
  writeFileSync(join(out, "report.json"), `${JSON.stringify({ command: r.command, machine: m, passed: results.length > 0 && results.every((x) => x.passed), results, ...r.extra, commands: r.commands }, null, 1)}\n`);
  const md = [`# ${r.title}`, "", `\`${r.command}\` at ${m.date} on ${m.host}${m.commit ? `, commit ${m.commit}` : ""}.`];
  md.push(`GPUs: ${(m.gpus as string[]).join("; ")}; driver ${m.driver ?? "?"}; ${Object.entries(m).filter(([k]) => !["date", "host", "commit", "gpus", "driver"].includes(k)).map(([k, v]) => `${k} ${v}`).join(", ")}.`, "");
  md.push(`**${results.filter((x) => x.passed).length} of ${results.length} checks passed.**`, "", "| check | result | what |", "| --- | --- | --- |");
  md.push(...results.map((x) => `| ${x.name} | ${x.passed ? "PASS" : "**FAIL**"} | ${x.title.replaceAll("|", "\\|")} |`), "");
  for (const x of results) {
    md.push(`## ${x.name}: ${x.passed ? "PASS" : "FAIL"}`, "", x.title, "");
    for (const f of x.failures) md.push("Failed:", "```", f, "```");
    for (const [k, v] of Object.entries(x.figures)) md.push(`- ${k}: ${show(v)}`);
    md.push("");
  }
  for (const [k, v] of Object.entries(r.extra)) md.push(`## ${k}`, "", "```", JSON.stringify(v, null, 1), "```", "");
  md.push("## Commands", "", ...r.commands.map((c) => `- \`${c}\``), "", r.footer, "");
  writeFileSync(join(out, "REPORT.md"), md.join("\n"));
}

// ---- the monitor's screens in tmux -------------------------------------------------------------------

export interface Shot {
  /** Seconds since the part's zero. */
  t: number;
  label: string;
  text: string;
}

/** Panes captured into one file, each under its part, time and label. */
export class Screens {
  constructor(
    readonly tmux: Tmux,
    readonly file: Sections,
  ) {}
  shot(p: Part, label: string, text: string): Shot {
    const s = { t: p.since(), label, text };
    this.file.add(`[${p.id}] +${s.t} s ${label}`, text);
    return s;
  }
  /** Press `key`, wait for its tab ([2 Process]) and capture. */
  async show(p: Part, s: string, key: string, name: string, label = name.toLowerCase()): Promise<Shot> {
    this.tmux.keys(s, key);
    await this.tmux.until(s, `[${key} ${name}]`, 5000).catch(() => "");
    await Bun.sleep(300);
    return this.shot(p, label, this.tmux.pane(s));
  }
  /** The Tensors screen filtered by `filter` (/, the text, Enter), captured; the filter cleared after. */
  async filtered(p: Part, s: string, filter: string): Promise<Shot> {
    await this.show(p, s, "3", "Tensors");
    this.tmux.keys(s, "/");
    await Bun.sleep(100);
    this.tmux.type(s, filter);
    this.tmux.keys(s, "Enter");
    await this.tmux.until(s, `(filter: ${filter})`, 5000).catch(() => "");
    await Bun.sleep(300);
    const text = this.tmux.pane(s);
    this.tmux.keys(s, "/");
    await Bun.sleep(100);
    this.tmux.keys(s, "Enter"); // an empty filter: every row again
    await Bun.sleep(200);
    return this.shot(p, `tensors /${filter}`, text);
  }
}

export const lineOf = (text: string, re: RegExp) => text.split("\n").find((l) => re.test(l))?.trim() ?? null;

/** The Tensors table's header and rows (the status line left out). */
export function table(text: string): { header: string; rows: string[] } {
  const lines = text.trimEnd().split("\n");
  const h = lines.findIndex((l) => /\bSIZE\b/.test(l) && /\bCATEGORY\b/.test(l));
  return h < 0 ? { header: "", rows: [] } : { header: lines[h]!, rows: lines.slice(h + 1, -1) };
}
