#!/usr/bin/env bun
// The whole path on a real GPU, in one command:
//   bun run e2e:gpu [OUT_DIR]          (default e2e-report/; PYTHON=… picks the interpreter with torch)
// 1. starts test/tui/train.py under `gpumem-tui run` in tmux and waits for the Process screen to
//    show allocator numbers;
// 2. visits screens 1-4, each pane captured to OUT_DIR/screens/;
// 3. compares `gpumem-tui --json --once` (and the Process screen) with torch's own numbers, which
//    train.py prints every 20 steps;
// 4. d: the status line names snapshot files that exist, are pickles, and `view --json` opens;
// 5. e, y: the status line says how many bytes empty_cache released;
// 6. kill -9 of the monitor: the training goes on, its step times before and after;
// 7. a new monitor finds the process again (Overview, Process, --json --once);
// 8. an OOM provoked in the running training (SIGUSR1): --json --once and the Process screen report it;
// 9. test/agent/scenarios.py oom (the process ends right after its OOM) under `run --json`: the
//    NDJSON reports the OOM;
// then OUT_DIR/REPORT.md and OUT_DIR/report.json, pass/fail per check with the figures.
// Every check is independent: a failure is recorded and the next check runs. Exit status 0 when
// every check passed, 1 when one failed, 2 when this machine cannot run it (no NVIDIA GPU, no
// torch with CUDA, no tmux: said which, nothing started).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, closeSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import type { Document, Process } from "../../src/system/schema";
import { alive, BUN, BYTES, CLI, findPython, findTmux, gitCommit, lastLine, median, mib, parseBytes, ppid, probeGpus, q, ROOT, show, Tmux, waitFor } from "./e2e-support";
const TRAIN = join(ROOT, "test", "tui", "train.py");
const SCENARIOS = join(ROOT, "test", "agent", "scenarios.py");
const COLS = 250; // wide enough for the status line of `d` with both snapshot paths
const ROWS = 60;
const TRAIN_SECONDS = 1800; // an upper bound: the script stops the run (SIGTERM) when it is done with it

const USAGE = `usage: bun run e2e:gpu [OUT_DIR]      (default e2e-report/)

Runs the monitor end to end on this machine's GPU: a real training run under \`gpumem-tui run\`
driven in tmux, the numbers against torch's, d, e, kill -9 and restart of the monitor, OOMs;
writes OUT_DIR/REPORT.md and OUT_DIR/report.json. Needs an NVIDIA GPU, PyTorch with CUDA
(python3, or the interpreter named by PYTHON) and tmux. Exit status: 0 all checks passed,
1 a check failed, 2 this machine cannot run it.
`;

// ---- arguments and what this machine has ----------------------------------------------------------

const argv = process.argv.slice(2);
if (argv.includes("-h") || argv.includes("--help")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const unknown = argv.filter((a) => a.startsWith("-"));
if (unknown.length || argv.length > 1) {
  process.stderr.write(`e2e:gpu: unexpected argument ${unknown[0] ?? argv[1]}\n\n${USAGE}`);
  process.exit(2);
}
const OUT = resolve(argv[0] ?? "e2e-report");
const PYTHON_NAME = process.env.PYTHON || "python3";

interface Machine {
  date: string;
  host: string;
  gpus: string[];
  driver: string | null;
  torch: string | null;
  torch_cuda: string | null;
  python: string | null;
  bun: string;
  tmux: string | null;
  commit: string | null;
}

/** What this machine lacks for the run (empty: it can run), and what it has. */
function preflight(): { missing: string[]; machine: Machine; python: string | null; tmux: string | null } {
  const missing: string[] = [];
  const machine: Machine = {
    date: new Date().toISOString(),
    host: hostname(),
    gpus: [],
    driver: null,
    torch: null,
    torch_cuda: null,
    python: null,
    bun: Bun.version,
    tmux: null,
    commit: null,
  };
  // The GPU, as the monitor itself sees it.
  const gpu = probeGpus();
  machine.gpus = gpu.gpus;
  machine.driver = gpu.driver;
  if (gpu.missing) missing.push(gpu.missing);
  // PyTorch with CUDA.
  const python = findPython(PYTHON_NAME);
  machine.python = python;
  if (!python) {
    missing.push(`no torch: no Python interpreter "${PYTHON_NAME}" (set PYTHON to one that has torch)`);
  } else {
    const p = Bun.spawnSync([python, "-c", "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda, torch.cuda.is_available()]))"], { stdout: "pipe", stderr: "pipe" });
    if (p.exitCode !== 0) {
      missing.push(`no torch: \`${PYTHON_NAME} -c "import torch"\` failed: ${lastLine(p.stderr.toString()) || `exit status ${p.exitCode}`}`);
    } else {
      const [version, cuda, available] = JSON.parse(lastLine(p.stdout.toString())) as [string, string | null, boolean];
      machine.torch = version;
      machine.torch_cuda = cuda;
      if (!available) missing.push(`no torch with CUDA: torch ${version} (CUDA ${cuda ?? "none"}) sees no GPU: torch.cuda.is_available() is False`);
    }
  }
  // tmux, and a pane it can open.
  const t = findTmux();
  machine.tmux = t.version;
  if (t.missing) missing.push(t.missing);
  machine.commit = gitCommit();
  return { missing, machine, python, tmux: t.tmux };
}

const pre = preflight();
if (pre.missing.length > 0) {
  process.stderr.write(
    `e2e:gpu: cannot run on this machine; nothing was started:\n${pre.missing.map((m) => `  - ${m}\n`).join("")}` +
      "It drives the monitor on a real training run: run it where there is an NVIDIA GPU, PyTorch with CUDA and tmux.\n",
  );
  process.exit(2);
}
const PY = pre.python!;
const TMUX = pre.tmux!;

// ---- the run's private places -------------------------------------------------------------------

mkdirSync(join(OUT, "screens"), { recursive: true });
// The agents' directory (mode 0700, ours alone: only this run's processes are in it) and a TMPDIR
// for the monitor, where `run` puts the training's output (gpumem-tui-run-<monitor pid>-<random>.log).
const AGENTS = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "gpumem-e2e-"));
const WORK = mkdtempSync(join(tmpdir(), "gpumem-e2e-work-"));
const SOCKET = `gpumem-e2e-gpu-${process.pid}`;
const ENV = { ...process.env, GPUMEM_TUI_DIR: AGENTS } as Record<string, string>;
const T = new Tmux(TMUX, SOCKET);
const tmux = (...a: string[]) => T.run(...a);
const pane = (s: string) => T.pane(s);
/** The monitor's status line: the last line of its frame. */
const statusLine = (text: string) => (text.trimEnd().split("\n").pop() ?? "").trim();
const keys = (s: string, ...k: string[]) => T.keys(s, ...k);

function startSession(name: string, cols: number, rows: number, command: string): void {
  // /bin/sh runs the line (not the user's shell); the pane stays after the command ends, so its
  // exit status can be read and nothing in the pane's process group gets a hang-up.
  const script = `cd ${q(ROOT)}; GPUMEM_TUI_DIR=${q(AGENTS)} TMPDIR=${q(WORK)} NO_COLOR=1 ${command}; echo "exit status $?"; sleep 3600`;
  const r = tmux("new-session", "-d", "-s", name, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", script);
  if (!r.ok) throw new Error(`tmux new-session failed: ${r.err}`);
}

const until = (session: string, what: string | RegExp | ((text: string) => boolean), timeoutMs: number, label = String(what)) => T.until(session, what, timeoutMs, label);

function save(name: string, text: string): string {
  const path = join(OUT, "screens", `${name}.txt`);
  writeFileSync(path, text);
  return relative(OUT, path);
}

function jsonOnce(): Document {
  const p = Bun.spawnSync([BUN, CLI, "--json", "--once"], { cwd: ROOT, env: ENV, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`gpumem-tui --json --once: exit ${p.exitCode}: ${p.stderr.toString().trim()}`);
  return JSON.parse(p.stdout.toString()) as Document;
}
const torchOf = (doc: Document, pid: number): Process | undefined => doc.processes.find((p) => p.pid === pid && p.pytorch);

/** A line of train.py: torch's own numbers at a step boundary. */
interface TrainLine {
  step: number;
  step_ms: number;
  allocated: number;
  reserved: number;
  max_allocated: number;
  t: number;
}
const LINE = /^step (\d+) loss \S+ step_ms (\S+) allocated (\d+) reserved (\d+) max_allocated (\d+) t (\S+)$/;

const state = { trainPid: 0, monitorPid: 0, log: "", killedAt: 0, stepAtKill: 0 };
/** The training's last line, once it was stopped at the end. */
let stopped: string | null = null;

function logText(): string {
  try {
    return state.log ? readFileSync(state.log, "utf8") : "";
  } catch {
    return "";
  }
}
function trainLines(): TrainLine[] {
  const out: TrainLine[] = [];
  for (const l of logText().split("\n")) {
    const m = LINE.exec(l.trim());
    if (m) out.push({ step: +m[1]!, step_ms: +m[2]!, allocated: +m[3]!, reserved: +m[4]!, max_allocated: +m[5]!, t: +m[6]! });
  }
  return out;
}
const logTail = (n = 15) => logText().trimEnd().split("\n").slice(-n).join("\n");

/** torch's lines around a moment (±3 s; at least the nearest before and after). */
function around(lines: TrainLine[], tSec: number): TrainLine[] {
  const near = lines.filter((l) => Math.abs(l.t - tSec) <= 3);
  if (near.length) return near;
  const before = lines.filter((l) => l.t <= tSec).pop();
  const after = lines.find((l) => l.t > tSec);
  return [before, after].filter((l): l is TrainLine => !!l);
}

function pickleHeader(path: string): string {
  const fd = openSync(path, "r");
  const b = Buffer.alloc(2);
  readSync(fd, b, 0, 2, 0);
  closeSync(fd);
  return `0x${b[0]!.toString(16)} 0x${b[1]!.toString(16)}`;
}
const isPickle = (path: string) => {
  const [a, v] = pickleHeader(path).split(" ").map((x) => Number.parseInt(x, 16));
  return a === 0x80 && v! >= 2 && v! <= 5; // PROTO, protocol 2..5
};

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    cleanUp();
    writeReport();
    process.stderr.write(`e2e:gpu: interrupted; the report so far is in ${OUT}\n`);
    process.exit(130);
  });
}

// ---- checks ----------------------------------------------------------------------------------------

interface Check {
  name: string;
  title: string;
  passed: boolean;
  seconds: number;
  figures: Record<string, unknown>;
  failures: string[];
  notes: string[];
  evidence: string[];
}
const checks: Check[] = [];

async function check(name: string, title: string, fn: (c: Check) => Promise<void>): Promise<void> {
  const c: Check = { name, title, passed: false, seconds: 0, figures: {}, failures: [], notes: [], evidence: [] };
  const t0 = performance.now();
  process.stdout.write(`[${name}] ${title} … `);
  try {
    await fn(c);
  } catch (e) {
    c.failures.push((e as Error).message);
  }
  c.seconds = +((performance.now() - t0) / 1000).toFixed(1);
  c.passed = c.failures.length === 0;
  checks.push(c);
  process.stdout.write(`${c.passed ? "PASS" : "FAIL"} (${c.seconds} s)\n${c.failures.map((f) => `    ${f.split("\n")[0]}\n`).join("")}`);
  writeReport(); // after every check: a run cut short still leaves its report
}
const need = (c: Check, ok: unknown, failure: string) => {
  if (!ok) c.failures.push(failure);
  return !!ok;
};
function requireTraining(): void {
  if (!state.trainPid) throw new Error("skipped: the training run under the monitor never started (see check `start`)");
}

// 1. The training under `gpumem-tui run`, in tmux; the Process screen with allocator numbers.
await check("start", "a training run under `gpumem-tui run` in tmux; the Process screen shows allocator numbers", async (c) => {
  const t0 = Date.now();
  startSession("run", COLS, ROWS, `${q(BUN)} ${q(CLI)} run --interval 500 -- ${q(PY)} ${q(TRAIN)} ${TRAIN_SECONDS}`);
  // The agent's manifest appears once the program has initialized CUDA (and built or found the
  // allocator hook: the first build on a machine takes a while).
  const pid = await waitFor(
    () => {
      const now = pane("run");
      if (/exit status \d+/.test(now)) throw new Error(`the monitor ended before the training attached:\n${now.trimEnd()}`);
      if (/exited with status/.test(statusLine(now))) throw new Error(`the training ended before its agent attached: ${statusLine(now)}`);
      for (const f of existsSync(AGENTS) ? readdirSync(AGENTS) : []) {
        const m = /^(\d+)\.json$/.exec(f);
        if (!m) continue;
        try {
          const man = JSON.parse(readFileSync(join(AGENTS, f), "utf8")) as { cmdline: string[] };
          if (man.cmdline.some((a) => a.endsWith("train.py")) && alive(Number(m[1]))) return Number(m[1]);
        } catch {
          // being rewritten
        }
      }
      return null;
    },
    600_000,
    "the training's agent manifest",
  );
  state.trainPid = pid;
  c.figures.train_pid = pid;
  c.figures.seconds_to_agent = +((Date.now() - t0) / 1000).toFixed(1);
  const parent = ppid(pid);
  const cmd = parent ? readFileSync(`/proc/${parent}/cmdline`, "utf8").split("\0").join(" ") : "";
  if (need(c, parent && cmd.includes("cli.ts") && cmd.includes(" run "), `the training's parent (pid ${parent}) is not the monitor: ${cmd}`)) state.monitorPid = parent!;
  c.figures.monitor_pid = parent;
  state.log = readdirSync(WORK).filter((f) => f.startsWith(`gpumem-tui-run-${parent}-`) && f.endsWith(".log")).map((f) => join(WORK, f))[0] ?? "";
  c.figures.training_output = "train.log (copied from the monitor's log of the program's output)";
  keys("run", "2");
  const text = await until(
    "run",
    (t) => t.includes("[2 Process]") && t.includes(`pid ${pid} [live]`) && new RegExp(`allocated (${BYTES})  reserved (${BYTES})`).test(t) && /step [1-9]\d*/.test(t),
    120_000,
    "the Process screen with allocated, reserved and a step",
  );
  const m = new RegExp(`allocated (${BYTES})  reserved (${BYTES})`).exec(text)!;
  c.figures.seconds_to_numbers = +((Date.now() - t0) / 1000).toFixed(1);
  c.figures.process_screen_allocated = m[1];
  c.figures.process_screen_reserved = m[2];
  need(c, parseBytes(m[1]!) > 0, `the Process screen shows allocated ${m[1]}`);
  c.evidence.push(save("0-first-numbers", text));
});

// 2. Screens 1-4.
await check("screens", "screens 1-4 each show the training process", async (c) => {
  requireTraining();
  const pid = state.trainPid;
  const rowRe = new RegExp(`^\\s*${pid}\\s+\\S+\\s+\\d+\\s+(?:${BYTES}|n/a)\\s+(${BYTES})\\s*(${BYTES})\\s+([a-z]+)\\s*(\\d+)`, "m");
  const screens: [string, string, (t: string) => boolean, string][] = [
    ["1", "Overview", (t) => rowRe.test(t), `a row for pid ${pid} with allocated, reserved, phase and step`],
    ["2", "Process", (t) => t.includes(`pid ${pid} [live]`) && /allocated \S+ \S+  reserved/.test(t), `pid ${pid} [live] with allocated and reserved`],
    ["3", "Tensors", (t) => t.includes("Live memory by category"), "Live memory by category"],
    ["4", "Segments", (t) => /\d+ segments: reserved/.test(t), "N segments: reserved …"],
  ];
  for (const [key, name, ok, what] of screens) {
    keys("run", key);
    try {
      await until("run", (t) => t.includes(`[${key} ${name}]`) && ok(t), 15_000, `${name}: ${what}`);
      await Bun.sleep(1000); // a couple of samples later, as a user would read it
      const text = pane("run");
      c.evidence.push(save(`${key}-${name.toLowerCase()}`, text));
      if (name === "Overview") {
        const m = rowRe.exec(text);
        if (m) Object.assign(c.figures, { overview_allocated: m[1], overview_reserved: m[2], overview_phase: m[3], overview_step: +m[4]! });
      }
    } catch (e) {
      c.failures.push(`screen ${key} ${name}: ${(e as Error).message}`);
      c.evidence.push(save(`${key}-${name.toLowerCase()}-failed`, pane("run")));
    }
  }
  keys("run", "2"); // d and e act on the Process screen's process
});

// 3. The monitor's numbers against torch's own.
await check("numbers", "the monitor's allocated / reserved / peak (--json --once, Process screen) against torch's", async (c) => {
  requireTraining();
  const pid = state.trainPid;
  await waitFor(() => trainLines().length >= 5, 120_000, "five lines of torch's numbers from train.py");
  const samples: { t: number; allocated: number; reserved: number; peak: number; step: number; hook: string; tui_reserved: string | null }[] = [];
  for (let i = 0; i < 3; i++) {
    const doc = jsonOnce();
    const p = torchOf(doc, pid);
    const tui = new RegExp(`allocated (${BYTES})  reserved (${BYTES})`).exec(pane("run"));
    if (need(c, p?.pytorch, `--json --once lists no PyTorch numbers for pid ${pid}`) && p?.pytorch) {
      samples.push({ t: doc.time_unix_ms / 1000, allocated: p.pytorch.allocated_bytes, reserved: p.pytorch.reserved_bytes, peak: p.pytorch.peak_allocated_bytes, step: p.pytorch.step, hook: p.pytorch.hook_mode, tui_reserved: tui?.[2] ?? null });
    }
    await Bun.sleep(1000);
  }
  await Bun.sleep(1500); // torch's lines after the last sample
  const lines = trainLines();
  const rows: Record<string, unknown>[] = [];
  for (const s of samples) {
    const near = around(lines, s.t);
    if (!need(c, near.length, `no line of torch's numbers near ${new Date(s.t * 1000).toISOString()}`)) continue;
    const rMin = Math.min(...near.map((l) => l.reserved));
    const rMax = Math.max(...near.map((l) => l.reserved));
    const aMin = Math.min(...near.map((l) => l.allocated));
    const aMax = Math.max(...near.map((l) => l.max_allocated));
    const peak = near.reduce((a, l) => (Math.abs(l.t - s.t) < Math.abs(a.t - s.t) ? l : a)).max_allocated;
    const tol = 0.01 * rMax;
    rows.push({
      time: new Date(s.t * 1000).toISOString(),
      hook_mode: s.hook,
      monitor_step: s.step,
      torch_steps: `${near[0]!.step}–${near[near.length - 1]!.step}`,
      monitor_reserved_bytes: s.reserved,
      torch_reserved_bytes: rMin === rMax ? rMin : `${rMin}–${rMax}`,
      monitor_allocated_bytes: s.allocated,
      torch_allocated_range_bytes: `${aMin}–${aMax} (step boundary – max_memory_allocated)`,
      monitor_peak_allocated_bytes: s.peak,
      torch_max_allocated_bytes: peak,
      process_screen_reserved: s.tui_reserved,
    });
    need(c, s.reserved >= rMin - tol && s.reserved <= rMax + tol, `reserved: monitor ${s.reserved} (${mib(s.reserved)}), torch ${rMin}–${rMax} around it (tolerance 1%)`);
    need(c, s.allocated >= aMin - tol && s.allocated <= aMax + tol, `allocated: monitor ${s.allocated} (${mib(s.allocated)}) outside torch's ${aMin}–${aMax} (boundary to peak, tolerance 1%)`);
    need(c, Math.abs(s.peak - peak) <= 0.01 * peak, `peak allocated: monitor ${s.peak}, torch.cuda.max_memory_allocated ${peak} (tolerance 1%)`);
    if (s.tui_reserved !== null) {
      const v = parseBytes(s.tui_reserved);
      need(c, v >= rMin * 0.99 && v <= rMax * 1.01, `the Process screen's reserved ${s.tui_reserved} against torch's ${mib(rMin)}–${mib(rMax)} (tolerance 1%)`);
    } else c.failures.push("the Process screen shows no allocated/reserved line");
  }
  c.figures.samples = rows;
  c.notes.push("torch's numbers are printed by train.py every 20 steps at a step boundary; --json --once samples mid-step, so allocated is checked between the boundary value and the peak, reserved (steady in a steady run) against the lines within ±3 s.");
});

// 4. d: a snapshot.
await check("dump", "d: the status line names snapshot files that exist, are pickles and open with `view --json`", async (c) => {
  requireTraining();
  keys("run", "2");
  await until("run", "[2 Process]", 5_000);
  keys("run", "d");
  // Done when the status line names a file or a failure (it may be cut at the pane's width: the
  // agent's path, then the monitor's own, then where to open them).
  const text = await until("run", (t) => !/asking pid/.test(statusLine(t)) && /\.pickle|failed|has exited|still running/.test(statusLine(t)), 120_000, "the outcome of d in the status line");
  c.evidence.push(save("5-dump", text));
  const status = statusLine(text);
  c.figures.status_line = status;
  need(c, !/failed/.test(status), `the status line reports a failure: ${status}`);
  const paths = [...status.matchAll(/(\/\S+?\.pickle)(?=[\s)]|$)/g)].map((m) => m[1]!);
  need(c, paths.length > 0, "the status line names no complete .pickle path");
  const files: Record<string, unknown>[] = [];
  for (const path of paths) {
    const f: Record<string, unknown> = { path, exists: existsSync(path) };
    files.push(f);
    if (!need(c, f.exists, `${path} does not exist`)) continue;
    f.bytes = statSync(path).size;
    f.header = pickleHeader(path);
    need(c, isPickle(path), `${path} does not start with a pickle header (0x80, protocol 2-5): ${f.header}`);
    const v = Bun.spawnSync([BUN, CLI, "view", path, "--json"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
    if (need(c, v.exitCode === 0, `gpumem-tui view ${path} --json: exit ${v.exitCode}: ${v.stderr.toString().trim()}`)) {
      const s = JSON.parse(v.stdout.toString()) as { devices?: { reserved_bytes?: number }[]; trace?: { entries?: number } | null };
      f.view_reserved_bytes = s.devices?.[0]?.reserved_bytes ?? null;
      f.view_trace_entries = s.trace?.entries ?? null;
    }
  }
  c.figures.files = files;
});

// 5. e: empty the cache.
await check("empty-cache", "e, y: the status line says how many bytes empty_cache released", async (c) => {
  requireTraining();
  keys("run", "2");
  await until("run", "[2 Process]", 5_000);
  keys("run", "e");
  await until("run", (t) => statusLine(t).includes("y / n"), 10_000, "the question (y / n)");
  keys("run", "y");
  const text = await until("run", (t) => /empty_cache released|empty_cache failed|has exited|still running/.test(statusLine(t)), 60_000, "the outcome of e in the status line");
  c.evidence.push(save("6-empty-cache", text));
  c.figures.status_line = statusLine(text);
  const m = new RegExp(`empty_cache released (${BYTES}) \\(reserved (${BYTES}) → (${BYTES})\\)`).exec(statusLine(text));
  if (need(c, m, `no "empty_cache released N (reserved A → B)" in the status line`) && m) {
    Object.assign(c.figures, { released: m[1], reserved_before: m[2], reserved_after: m[3] });
    const [r, b, a] = [parseBytes(m[1]!), parseBytes(m[2]!), parseBytes(m[3]!)];
    need(c, r >= 0 && Math.abs(b - a - r) <= Math.max(0.02 * b, 2 ** 20), `released ${m[1]} is not before − after (${m[2]} − ${m[3]})`);
  }
});

// 6. kill -9 of the monitor: the training goes on.
await check("monitor-killed", "kill -9 of the monitor: the training keeps going at the same step time", async (c) => {
  requireTraining();
  if (!state.monitorPid) throw new Error("no monitor pid (see check `start`)");
  const pid = state.trainPid;
  const before = trainLines().slice(-5);
  need(c, before.length >= 3, `only ${before.length} lines of step times before the kill`);
  state.killedAt = Date.now() / 1000;
  process.kill(state.monitorPid, "SIGKILL");
  c.figures.killed_at = new Date(state.killedAt * 1000).toISOString();
  state.stepAtKill = before[before.length - 1]?.step ?? 0;
  c.figures.step_at_kill = state.stepAtKill;
  c.figures.pane_after_kill = await until("run", /exit status \d+/, 10_000)
    .then((t) => /exit status \d+/.exec(t)![0])
    .catch(() => "no exit status on the pane");
  need(c, !alive(state.monitorPid), `the monitor (pid ${state.monitorPid}) is still alive`);
  // Lines written entirely after the kill: skip the first one (its 20 steps straddle the kill).
  const after = await waitFor(
    () => {
      if (!alive(pid)) throw new Error(`the training (pid ${pid}) died after the monitor was killed; its output:\n${logTail()}`);
      const l = trainLines().filter((x) => x.t > state.killedAt).slice(1);
      return l.length >= 5 ? l.slice(0, 5) : null;
    },
    120_000,
    "five lines of step times after the kill",
  );
  const b = median(before.map((l) => l.step_ms));
  const a = median(after.map((l) => l.step_ms));
  Object.assign(c.figures, {
    step_ms_before: before.map((l) => l.step_ms),
    step_ms_after: after.map((l) => l.step_ms),
    median_step_ms_before: b,
    median_step_ms_after: a,
    ratio_after_over_before: +(a / b).toFixed(3),
    step_after: after[after.length - 1]!.step,
    agent_files_still_there: existsSync(join(AGENTS, `${pid}.ring`)) && existsSync(join(AGENTS, `${pid}.json`)),
  });
  need(c, alive(pid), `the training (pid ${pid}) is not alive`);
  need(c, a / b <= 1.5, `the step time went from ${b} ms to ${a} ms after the monitor died (limit 1.5×)`);
  c.notes.push("step_ms: train.py's mean over 20 steps, the GPU synchronized at each line; medians of the last 5 lines before the kill and the first 5 written wholly after it.");
});

// 7. A new monitor finds the process again.
await check("monitor-restarted", "a new monitor finds the running process again (Overview, Process, --json --once)", async (c) => {
  requireTraining();
  const pid = state.trainPid;
  const t0 = Date.now();
  startSession("again", COLS, ROWS, `${q(BUN)} ${q(CLI)} --interval 500`);
  const rowRe = new RegExp(`^\\s*${pid}\\s+\\S+\\s+\\d+\\s+(?:${BYTES}|n/a)\\s+(${BYTES})\\s*(${BYTES})\\s+([a-z]+)\\s*(\\d+)`, "m");
  try {
    const text = await until("again", (t) => t.includes("[1 Overview]") && rowRe.test(t), 30_000, `an Overview row for pid ${pid} with its allocator numbers`);
    c.figures.seconds_to_overview_row = +((Date.now() - t0) / 1000).toFixed(1);
    const m = rowRe.exec(text)!;
    Object.assign(c.figures, { overview_allocated: m[1], overview_reserved: m[2], overview_step: +m[4]! });
    c.evidence.push(save("7-restart-overview", text));
  } catch (e) {
    c.failures.push((e as Error).message);
    c.evidence.push(save("7-restart-overview-failed", pane("again")));
  }
  keys("again", "2");
  try {
    const re = new RegExp(`allocated (${BYTES})  reserved (${BYTES})[\\s\\S]*?step (\\d+)`);
    const first = await until("again", (t) => t.includes(`pid ${pid} [live]`) && re.test(t), 30_000, `the Process screen of pid ${pid}, live, with numbers`);
    const s1 = Number(re.exec(first)![3]);
    await Bun.sleep(3000);
    const later = pane("again");
    c.evidence.push(save("8-restart-process", later));
    const m = re.exec(later);
    const s2 = m ? Number(m[3]) : Number.NaN;
    Object.assign(c.figures, { process_allocated: m?.[1] ?? null, process_reserved: m?.[2] ?? null, process_step: s1, process_step_3s_later: s2 });
    need(c, m && parseBytes(m[1]!) > 0, `the Process screen shows allocated ${m?.[1]}`);
    need(c, s2 > s1, `the Process screen's step did not advance in 3 s (${s1} → ${s2})`);
  } catch (e) {
    c.failures.push((e as Error).message);
    c.evidence.push(save("8-restart-process-failed", pane("again")));
  }
  const doc = jsonOnce();
  const p = torchOf(doc, pid);
  if (need(c, p?.pytorch, `--json --once lists no PyTorch numbers for pid ${pid}`) && p?.pytorch) {
    await Bun.sleep(1500);
    const near = around(trainLines(), doc.time_unix_ms / 1000);
    const rMin = Math.min(...near.map((l) => l.reserved));
    const rMax = Math.max(...near.map((l) => l.reserved));
    Object.assign(c.figures, { json_step: p.pytorch.step, json_reserved_bytes: p.pytorch.reserved_bytes, torch_reserved_bytes: rMin === rMax ? rMin : `${rMin}–${rMax}` });
    need(c, p.pytorch.step > state.stepAtKill, `the JSON's step ${p.pytorch.step} is not past the step at the kill (${state.stepAtKill})`);
    need(c, near.length && p.pytorch.reserved_bytes >= rMin * 0.99 && p.pytorch.reserved_bytes <= rMax * 1.01, `reserved: JSON ${p.pytorch.reserved_bytes}, torch ${rMin}–${rMax} (tolerance 1%)`);
  }
});

// 8. An OOM in the running training: JSON and the Process screen report it.
let oomTorch: number | null = null;
await check("oom-live-json", "an OOM provoked in the running training (SIGUSR1): --json --once reports it as torch counts it", async (c) => {
  requireTraining();
  const pid = state.trainPid;
  if (!alive(pid)) throw new Error(`the training (pid ${pid}) is not running`);
  process.kill(pid, "SIGUSR1");
  const line = await waitFor(() => /^oom (raised num_ooms (\d+)|not raised).*$/m.exec(logText()), 60_000, "train.py's line about the OOM");
  c.figures.train_py = line[0];
  if (!need(c, line[2], "torch did not raise an OOM for 16 TiB")) return;
  oomTorch = Number(line[2]);
  c.figures.torch_num_ooms = oomTorch;
  const p = await waitFor(
    () => {
      const x = torchOf(jsonOnce(), pid);
      return x?.pytorch && x.pytorch.oom_count >= 1 ? x : null;
    },
    15_000,
    "--json --once with oom_count ≥ 1",
  ).catch((e: Error) => (c.failures.push(e.message), null));
  if (p?.pytorch) {
    c.figures.json_oom_count = p.pytorch.oom_count;
    need(c, p.pytorch.oom_count === oomTorch, `oom_count ${p.pytorch.oom_count} in the JSON, torch's num_ooms ${oomTorch}`);
  }
  // The agent's snapshot at the OOM, named in its manifest.
  try {
    const man = JSON.parse(readFileSync(join(AGENTS, `${pid}.json`), "utf8")) as { oom_snapshot: string | null };
    c.figures.oom_snapshot = man.oom_snapshot;
    if (need(c, man.oom_snapshot && existsSync(man.oom_snapshot), `the manifest names no OOM snapshot that exists (${man.oom_snapshot})`)) {
      need(c, isPickle(man.oom_snapshot!), `${man.oom_snapshot} is not a pickle (${pickleHeader(man.oom_snapshot!)})`);
      c.figures.oom_snapshot_bytes = statSync(man.oom_snapshot!).size;
    }
  } catch (e) {
    c.failures.push(`the agent's manifest: ${(e as Error).message}`);
  }
  const after = await waitFor(() => trainLines().filter((l) => l.t > Number(/ t (\S+)/.exec(line[0])?.[1] ?? 0)).length >= 2, 60_000, "steps after the OOM").catch(
    (e: Error) => (c.failures.push(`the training did not go on after the OOM: ${e.message}`), false),
  );
  c.figures.training_went_on = after;
});

await check("oom-live-tui", "the restarted monitor's Process screen counts the OOM", async (c) => {
  requireTraining();
  if (oomTorch === null) throw new Error("skipped: no OOM was provoked (see check `oom-live-json`)");
  keys("again", "2");
  const text = await until("again", (t) => t.includes(`pid ${state.trainPid} [`) && /OOMs [1-9]\d*/.test(t), 15_000, "OOMs ≥ 1 on the Process screen");
  c.evidence.push(save("9-restart-oom", text));
  const n = Number(/OOMs (\d+)/.exec(text)![1]);
  c.figures.process_screen_ooms = n;
  c.figures.torch_num_ooms = oomTorch;
  c.figures.chart_mark = /X OOM|OOM X/.test(text) ? "X OOM under the chart" : "not drawn (another mark in its place, or outside the window)";
  need(c, n === oomTorch, `the Process screen says OOMs ${n}, torch ${oomTorch}`);
});

// The training is done with: stopped at a step boundary (SIGTERM), its last line kept.
if (state.trainPid && alive(state.trainPid)) {
  process.kill(state.trainPid, "SIGTERM");
  stopped = await waitFor(() => /^done .*$/m.exec(logText())?.[0] ?? (!alive(state.trainPid) ? "the training ended without its done line" : null), 30_000, "the training's end").catch(() => null);
}

// 9. scenarios.py oom: the process ends right after its OOM; the NDJSON must still report it.
await check("oom-scenario", "test/agent/scenarios.py oom under `gpumem-tui run --json`: the NDJSON reports the OOM of a process that then exits", async (c) => {
  const ndjson = join(WORK, "oom-scenario.ndjson");
  const p = Bun.spawn([BUN, CLI, "run", "--json", "--output", ndjson, "--interval", "50", "--", PY, SCENARIOS, "oom"], { cwd: ROOT, env: ENV, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => p.kill("SIGKILL"), 300_000);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  c.figures.exit_status = code;
  writeFileSync(join(OUT, "oom-scenario.stderr.txt"), err);
  c.evidence.push("oom-scenario.stderr.txt");
  need(c, code === 0, `run exited with ${code}: ${lastLine(err)}`);
  // biome-ignore lint: the scenario's report is plain JSON
  let report: any = null;
  try {
    report = JSON.parse(lastLine(out));
    writeFileSync(join(OUT, "oom-scenario.json"), `${JSON.stringify(report, null, 1)}\n`);
    c.evidence.push("oom-scenario.json");
  } catch {
    c.failures.push(`the scenario printed no report: ${lastLine(out) || lastLine(err)}`);
  }
  if (report) {
    Object.assign(c.figures, { pid: report.pid, oom_raised: report.oom_raised, torch_num_ooms: report.torch?.num_ooms, ring_n_oom: report.header?.totals?.n_oom, oom_snapshot: report.oom_snapshot });
    need(c, report.oom_raised === true, "torch raised no OOM");
    need(c, report.header?.totals?.n_oom === report.torch?.num_ooms, `the ring's n_oom ${report.header?.totals?.n_oom}, torch's num_ooms ${report.torch?.num_ooms}`);
    need(c, report.oom_snapshot && existsSync(report.oom_snapshot) && isPickle(report.oom_snapshot), `no OOM snapshot pickle at ${report.oom_snapshot}`);
  }
  const docs = existsSync(ndjson)
    ? readFileSync(ndjson, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Document)
    : [];
  const pid = report?.pid as number | undefined;
  const counts = docs.map((d) => (pid ? torchOf(d, pid)?.pytorch?.oom_count ?? null : null));
  // Kept: the documents that list the scenario's process, and the last one.
  const kept = docs.filter((_, i) => counts[i] !== null || i === docs.length - 1);
  writeFileSync(join(OUT, "oom-scenario.ndjson"), kept.map((d) => `${JSON.stringify(d)}\n`).join(""));
  c.evidence.push("oom-scenario.ndjson");
  const seen = counts.filter((x): x is number => x !== null);
  Object.assign(c.figures, { documents: docs.length, documents_with_the_process: seen.length, max_oom_count: seen.length ? Math.max(...seen) : null, last_document_oom_count: counts[counts.length - 1] ?? null });
  need(c, docs.length > 0, "no NDJSON documents");
  need(c, seen.some((n) => n >= 1), `no NDJSON document reports an OOM for pid ${pid} (${seen.length} documents list it, oom_count ${[...new Set(seen)].join(", ") || "never"})`);
});

// ---- the report -------------------------------------------------------------------------------------

function cleanUp(): void {
  if (state.trainPid && alive(state.trainPid)) {
    try {
      process.kill(state.trainPid, "SIGKILL");
    } catch {
      // gone
    }
  }
  T.kill();
  try {
    // The training's output; where it never attached, whatever `run` logged of it.
    const log = state.log || (existsSync(WORK) ? readdirSync(WORK).filter((f) => /^gpumem-tui-run-\d+-[0-9a-f]+\.log$/.test(f)).map((f) => join(WORK, f))[0] : "");
    if (log && existsSync(log)) copyFileSync(log, join(OUT, "train.log"));
  } catch {
    // nothing to keep
  }
  rmSync(WORK, { recursive: true, force: true });
  rmSync(AGENTS, { recursive: true, force: true });
}

function writeReport(): void {
  const passed = checks.length > 0 && checks.every((c) => c.passed);
  const json = { command: "bun run e2e:gpu", date: pre.machine.date, machine: pre.machine, passed, training_stopped: stopped, checks };
  writeFileSync(join(OUT, "report.json"), `${JSON.stringify(json, null, 1)}\n`);
  const m = pre.machine;
  const lines = [
    "# gpumem-tui end to end on a GPU",
    "",
    `Command: \`bun run e2e:gpu ${relative(ROOT, OUT) || "."}\` at ${m.date} on ${m.host}${m.commit ? `, commit ${m.commit}` : ""}.`,
    `GPUs: ${m.gpus.join("; ")}; driver ${m.driver ?? "?"}; torch ${m.torch ?? "?"} (CUDA ${m.torch_cuda ?? "?"}, ${m.python}); bun ${m.bun}; ${m.tmux ?? "tmux ?"}.`,
    "",
    `**${checks.filter((c) => c.passed).length} of ${checks.length} checks passed.**`,
    "",
    "| check | result | seconds | what |",
    "| --- | --- | ---: | --- |",
    ...checks.map((c) => `| ${c.name} | ${c.passed ? "PASS" : "**FAIL**"} | ${c.seconds} | ${c.title.replaceAll("|", "\\|")} |`),
    "",
  ];
  for (const c of checks) {
    lines.push(`## ${c.name}: ${c.passed ? "PASS" : "FAIL"}`, "", c.title, "");
    for (const f of c.failures) lines.push("Failed:", "```", f, "```");
    for (const [k, v] of Object.entries(c.figures)) {
      if (Array.isArray(v) && v.length && typeof v[0] === "object") {
        lines.push(`- ${k}:`);
        for (const row of v as Record<string, unknown>[]) lines.push(`  - ${Object.entries(row).map(([a, b]) => `${a} ${show(b)}`).join(", ")}`);
      } else lines.push(`- ${k}: ${show(v)}`);
    }
    for (const n of c.notes) lines.push("", n);
    if (c.evidence.length) lines.push("", `Evidence: ${c.evidence.map((e) => `[${e}](${e})`).join(", ")}`);
    lines.push("");
  }
  if (stopped) lines.push(`The training was stopped with SIGTERM at the end; its last line: \`${stopped}\`. Its whole output: [train.log](train.log).`, "");
  writeFileSync(join(OUT, "REPORT.md"), lines.join("\n"));
}

cleanUp();
writeReport();
const failed = checks.filter((c) => !c.passed);
process.stdout.write(`\n${checks.length - failed.length} of ${checks.length} checks passed; report: ${join(OUT, "REPORT.md")}\n`);
process.exit(failed.length ? 1 : 0);
