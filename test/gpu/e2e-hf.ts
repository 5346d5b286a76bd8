#!/usr/bin/env bun
// Live detail on a real Hugging Face training, end to end, on a machine with two NVIDIA GPUs:
//   bun test/gpu/e2e-hf.ts OUT_DIR          (bun run e2e:hf OUT_DIR; PYTHON=… picks the interpreter)
// test/gpu/hf_gpt2.py (GPT-2 from transformers, AdamW, record_function ranges) writes torch's own
// figures after every step; the monitor's screens and JSON are held to them. Parts, each bounded
// and independent (a failure is recorded, the next part runs):
//   a  the TUI on it (tmux 200×60, GPU 0): Process and Tensors screens every 5 s, --json --once,
//      the monitor's CPU and memory, allocator events per second;
//   b  (beside a, GPU 1) `run --json --output`: NVML and PyTorch figures against the facts;
//   c  (beside a) an idle monitor's CPU and memory, for what following a busy process costs;
//   d  a 2-rank DDP job under torchrun: the Overview's job, each rank's Process screen, JSON;
//   e  --leak on GPU 0 and --oom-after on GPU 1 under `run --json`;
//   f  a recording for a fixture (ring, manifest, names asked for mid-run, facts);
//   g  that recording replayed: lost records, partial, sync, torch's allocated per step.
// Writes OUT_DIR/REPORT.md, report.json, screens.txt, evidence.txt and the recording
// (hf-gpt2.ring.xz, .json, .names.json, .facts.jsonl). Exit status 0 when every check passed,
// 1 when one failed, 2 when this machine cannot run it (nothing started).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Document } from "../../src/system/schema";
import { againstFacts as against, alive, bounded, kill, stopChildren, BUN, children, CLI, factFinal as finalOf, factSteps as steps, findPython, findTmux, gitCommit, jsonLines, lastLine, ppid, probeGpus, probeTorch, q, readText, ringHeader, ROOT, runPart, say, Sections, Tmux, usage, waitFor, writeReport, lineOf, Screens, table, type Fact, type Part, type Result, type Shot } from "./e2e-support";

const TRAIN = join(ROOT, "test", "gpu", "hf_gpt2.py");
const USAGE = `usage: bun test/gpu/e2e-hf.ts OUT_DIR     (bun run e2e:hf OUT_DIR)

Trains GPT-2 (transformers) under the monitor on two NVIDIA GPUs and checks what the screens and
JSON say against torch's own figures; writes OUT_DIR/REPORT.md and report.json. Needs 2 GPUs,
PyTorch with CUDA and transformers (python3, or the interpreter named by PYTHON) and tmux.
Exit status: 0 all checks passed, 1 a check failed, 2 this machine cannot run it.
`;
const argv = process.argv.slice(2);
if (argv.includes("-h") || argv.includes("--help")) (process.stdout.write(USAGE), process.exit(0));
if (argv.length !== 1 || argv[0]!.startsWith("-")) (process.stderr.write(`e2e:hf: ${argv.length ? `unexpected argument ${argv[1] ?? argv[0]}` : "OUT_DIR is missing"}\n\n${USAGE}`), process.exit(2));
const OUT = resolve(argv[0]!);
const PYTHON_NAME = process.env.PYTHON || "python3";
const DEADLINE = Date.now() + 535_000;

// ---- what this machine has ----------------------------------------------------------------------
const machine: Record<string, unknown> = { date: new Date().toISOString(), host: hostname(), bun: Bun.version, commit: gitCommit() };
const missing: string[] = [];
const gpu = probeGpus();
Object.assign(machine, { gpus: gpu.gpus, driver: gpu.driver });
if (gpu.missing) missing.push(gpu.missing);
else if (gpu.count < 2) missing.push(`fewer than 2 NVIDIA GPUs (NVML lists ${gpu.count}): parts b, d and e use two`);
const PY = findPython(PYTHON_NAME);
// The children's environment: ours, without what would steer the agent or the GPUs elsewhere.
const BASE: Record<string, string> = { PYTHONUNBUFFERED: "1", NO_COLOR: "1", CUDA_DEVICE_ORDER: "PCI_BUS_ID" };
for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "CUDA_VISIBLE_DEVICES" && !k.startsWith("GPUMEM_TUI_")) BASE[k] ??= v;
if (!PY) missing.push(`no torch: no Python interpreter "${PYTHON_NAME}" (set PYTHON to one that has torch and transformers)`);
else {
  const t = probeTorch(PY, BASE, ["transformers"]);
  Object.assign(machine, t.info);
  missing.push(...t.missing);
}
const tm = findTmux();
machine.tmux = tm.version;
if (tm.missing) missing.push(tm.missing);
machine.xz = Bun.which("xz");
if (missing.length) {
  process.stderr.write(`e2e:hf: cannot run on this machine; nothing was started:\n${missing.map((m) => `  - ${m}\n`).join("")}It trains GPT-2 under the monitor: run it where there are 2 NVIDIA GPUs, PyTorch with CUDA, transformers and tmux.\n`);
  process.exit(2);
}
const py = PY!;

// ---- places, sessions, screens --------------------------------------------------------------------
mkdirSync(OUT, { recursive: true });
const FILES = ["REPORT.md", "report.json", "screens.txt", "evidence.txt", "hf-gpt2.ring.xz", "hf-gpt2.ring.gz", "hf-gpt2.json", "hf-gpt2.names.json", "hf-gpt2.facts.jsonl"];
for (const f of FILES) rmSync(join(OUT, f), { force: true });
const WORK = mkdtempSync(join(tmpdir(), "gpumem-e2e-hf-"));
const SHM = existsSync("/dev/shm") ? "/dev/shm" : WORK;
const T = new Tmux(tm.tmux!, `gpumem-e2e-hf-${process.pid}`);
const screens = new Screens(T, new Sections(join(OUT, "screens.txt"), 4 << 20));
const evidence = new Sections(join(OUT, "evidence.txt"));
const results: Result[] = [];
const commands: string[] = [];
const parts: Record<string, unknown> = {};

const made: string[] = [];
/** A part's agent directory (0700, its own; on disk for f) and work directory. */
function place(p: Part, id = p.id) {
  const dir = mkdtempSync(join(id === "f" ? WORK : SHM, `gpumem-e2e-${id}-agents-`));
  made.push(dir);
  p.dirs.push(dir);
  return { dir, tmp: mkdtempSync(join(WORK, `${id}-`)) };
}
function session(p: Part, name: string, env: Record<string, string>, command: string): void {
  p.command(`${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(" ")} ${command}`);
  const vars = Object.entries({ ...env, PYTHONUNBUFFERED: "1", NO_COLOR: "1", CUDA_DEVICE_ORDER: "PCI_BUS_ID" }).map(([k, v]) => `${k}=${q(v)}`);
  T.start(name, 200, 60, `cd ${q(ROOT)}; unset CUDA_VISIBLE_DEVICES GPUMEM_TUI_DISABLE GPUMEM_TUI_RING_CAPACITY GPUMEM_TUI_KEEP GPUMEM_TUI_POLLING GPUMEM_TUI_HOOK; export ${vars.join(" ")}; ${command}; echo "exit status $?"; sleep 3600`);
  p.sessions.push(name);
}
function stop(p: Part): void {
  for (const s of p.sessions) T.run("kill-session", "-t", s);
  for (const pid of [...p.pids, ...p.dirs.flatMap(agentPids)]) kill(pid);
  parts[p.id] = { seconds: Math.round((Date.now() - p.started) / 1000), ...p.figures };
  results.push(...p.results);
  commands.push(...p.commands.map((c) => `[${p.id}] ${c}`));
}
/** The program's output as `run` logs it (TMPDIR/gpumem-tui-run-<monitor pid>-<random>.log). */
const runLog = (tmp: string) => readdirSync(tmp).filter((f) => /^gpumem-tui-run-\d+-[0-9a-f]+\.log$/.test(f)).map((f) => readText(join(tmp, f))).join("");
/** Throws where the program under the monitor in session `s` has ended already. */
function ended(s: string, tmp: string): false {
  if (/exited with status \d+|^exit status \d+/m.test(T.pane(s))) throw new Error(`the program ended early; its output ends:\n${runLog(tmp).slice(-3000)}`);
  return false;
}
/** The first and last lines of a long text. */
const ends = (text: string, n = 40) => {
  const l = text.split("\n");
  return l.length <= 2 * n ? text : [...l.slice(0, n), `[… ${l.length - 2 * n} lines …]`, ...l.slice(-n)].join("\n");
};
const agentPids = (dir: string) => (existsSync(dir) ? readdirSync(dir) : []).flatMap((f) => (/^\d+\.json$/.test(f) ? [Number.parseInt(f)] : [])).sort((a, b) => a - b);

async function jsonOnce(p: Part, dir: string): Promise<Document | null> {
  const r = await bounded([BUN, CLI, "--json", "--once"], { env: { ...BASE, GPUMEM_TUI_DIR: dir }, timeoutMs: p.ms(30_000) });
  evidence.add(`[${p.id}] +${p.since()} s gpumem-tui --json --once (exit ${r.code})`, r.out || r.err);
  try {
    return JSON.parse(r.out) as Document;
  } catch {
    return null;
  }
}
const PARTIAL = /partial|no recorded block accounts|records? lost/;
const HEX = /\b0x[0-9a-f]{8,}\b/;
const UNNAMED_RANGE = /range#\d+|^ {2}range \d+ +-?\d/m;
const cpuPct = (a: { t: number; cpu_s: number }, b: { t: number; cpu_s: number }) => +((100 * (b.cpu_s - a.cpu_s)) / Math.max(1e-9, b.t - a.t)).toFixed(2);
const shared: { cpuA?: number; cpuC?: number; recordsPerSecond?: number } = {};

// ---- a: the screens on one training -----------------------------------------------------------------
async function partA(p: Part): Promise<void> {
  const { dir, tmp } = place(p);
  const facts = join(tmp, "facts.jsonl");
  session(p, "a", { GPUMEM_TUI_DIR: dir, TMPDIR: tmp, CUDA_VISIBLE_DEVICES: "0" }, `${q(BUN)} ${q(CLI)} run -- ${q(py)} ${q(TRAIN)} --seconds 70 --facts ${q(facts)}`);
  const pid = await waitFor(() => ended("a", tmp) || agentPids(dir)[0], p.ms(150_000), "the training's agent (its manifest)");
  p.pids.push(pid);
  const monitor = ppid(pid)!;
  p.zero = (await waitFor(() => ended("a", tmp) || steps(facts)[0], p.ms(120_000), "the first step")).time;
  p.log(`training pid ${pid}, monitor pid ${monitor}; first step done`);
  const shots: Shot[] = [];
  const samples: { t: number; cpu_s: number; rss_bytes: number; records: number | null; n_alloc: number | null; num_alloc: number | null }[] = [];
  let once: Document | null = null;
  while (alive(pid) && p.since() < 90 && p.left() > 40_000) {
    const tick = Date.now();
    const u = usage(monitor);
    const h = ringHeader(join(dir, `${pid}.ring`));
    if (u && p.since() >= 3 && p.since() <= 68) samples.push({ t: p.since(), ...u, records: h?.write_index ?? null, n_alloc: h?.n_alloc ?? null, num_alloc: steps(facts).pop()?.num_alloc ?? null });
    if (!once && p.since() >= 35) once = await jsonOnce(p, dir);
    shots.push(await screens.show(p, "a", "2", "Process"), await screens.show(p, "a", "3", "Tensors"), await screens.show(p, "a", "6", "Findings"));
    for (const f of ["h.0.attn.c_attn", "wte"]) shots.push(await screens.filtered(p, "a", f));
    await Bun.sleep(Math.max(0, 5000 - (Date.now() - tick)));
  }
  const exit = await T.until("a", /exited with status \d+/, p.ms(60_000)).then((t) => Number(/exited with status (\d+)/.exec(t)![1])).catch(() => null);
  shots.push(await screens.show(p, "a", "2", "Process", "process (after exit)"));
  T.keys("a", "q");
  evidence.add("[a] the training's output", runLog(tmp));
  const fin = finalOf(facts);
  p.check("exit", "the training under `gpumem-tui run` exits 0; the monitor stays and says so", exit === 0 ? [] : [`exit status ${exit ?? "never shown"}`], { pid, steps: fin?.steps, steps_per_second: fin?.steps_per_second });
  // A sound training (zero_grad every step, nothing kept): the Findings screen shows no warning.
  const found = shots.filter((s) => s.label.startsWith("findings"));
  const warned = found.filter((s) => /^\s*(WARNING|ERROR) /m.test(s.text));
  p.check("no-false-warning", "the Findings screen of a sound training never shows a WARNING or ERROR (info only)", [...(found.length ? [] : ["no Findings screen captured"]), ...warned.slice(0, 3).map((s) => `+${s.t} s: ${lineOf(s.text, /^\s*(WARNING|ERROR) /m)}`)], { findings_screens: found.length, with_warning: warned.length });
  const proc = shots.filter((s) => s.label.startsWith("process"));
  const tens = shots.filter((s) => s.label.startsWith("tensors"));
  const bad = proc.filter((s) => PARTIAL.test(s.text));
  const lost = Math.max(0, ...proc.map((s) => Number(/(\d+) records? lost/.exec(s.text)?.[1] ?? 0)));
  p.check("not-partial", "the Process screen never says partial, records lost or 'no recorded block accounts' (zero records lost to the end)", bad.map((s) => `+${s.t} s (${s.label}): ${lineOf(s.text, PARTIAL)}`).slice(0, 5), { process_screens: proc.length, screens_partial: bad.length, records_lost_shown: lost });
  // A parameter's own row (not its gradient's, nor "exp_avg of" it), a gradient, AdamW's state.
  const want: Record<string, RegExp> = { parameter: /(?<![\w.]|of )(?:transformer\.)?(?:h\.0\.attn\.c_attn|wte)\.weight(?![\w.])/, gradient: /\.grad(?![\w.])/, exp_avg: /exp_avg of /, exp_avg_sq: /exp_avg_sq of / };
  const seen = Object.fromEntries(Object.entries(want).map(([k, re]) => [k, tens.find((s) => table(s.text).rows.some((r) => re.test(r)))?.t ?? null]));
  // Gradients live only from backward to zero_grad(set_to_none=True), part of each 20-ms step: a
  // screen captured every 5 s shows them at some captures only, so they are asked for by the end.
  const by = (k: string) => (k === "gradient" ? 70 : 30);
  p.check("names", "by 30 s the Tensors screen names parameters and AdamW state (exp_avg of, exp_avg_sq of); gradients (.grad, alive from backward to zero_grad) on some capture of the run", Object.entries(seen).flatMap(([k, t]) => (t === null ? [`${k}: never named`] : t > by(k) ? [`${k}: first named at +${t} s`] : [])), { first_seen_seconds: seen });
  const headers = tens.map((s) => table(s.text).header).filter(Boolean);
  const float32 = tens.some((s) => table(s.text).rows.some((r) => /\bfloat32\b/.test(r)));
  p.check("columns", "the Tensors table has SHAPE and DTYPE columns (float32 shown)", [...(headers.some((h) => /\bSHAPE\b/.test(h) && /\bDTYPE\b/.test(h)) ? [] : [`no SHAPE and DTYPE in the header: ${headers[0]?.trim() ?? "no table"}`]), ...(float32 ? [] : ["no row says float32"])], { header: headers[0]?.trim() ?? null });
  const hex = tens.flatMap((s) => table(s.text).rows.filter((r) => HEX.test(r)).map((r) => `+${s.t} s: ${r.trim()}`));
  p.check("no-addresses", "no Tensors row is named by a bare hex address", hex.length ? [`${hex.length} rows, e.g. ${hex[0]}`] : [], { rows_seen: tens.reduce((n, s) => n + table(s.text).rows.length, 0), address_rows: hex.length, examples: hex.slice(0, 5) });
  const names = [...new Set(proc.flatMap((s) => s.text.match(/Optimizer\.step#AdamW\.step|train_step/g) ?? []))];
  const unnamed = proc.flatMap((s) => (UNNAMED_RANGE.test(s.text) ? [`+${s.t} s: ${lineOf(s.text, /range#\d+|^ {2}range \d+ /)}`] : []));
  p.check("ranges", "the Process screen names record_function ranges (Optimizer.step#AdamW.step or train_step), never range#N", [...(names.length ? [] : ["no range name on any Process screen"]), ...unnamed.slice(0, 3)], { range_names_seen: names });
  const row = once?.processes.find((x) => x.pid === pid && x.pytorch);
  const vs = row?.pytorch ? against(steps(facts), once!.time_unix_ms / 1000, row.pytorch.allocated_bytes) : null;
  p.check("json-once", "--json --once mid-run lists the pid with NVML used bytes and PyTorch figures (hook mode) within torch's", !row ? [`no PyTorch row for pid ${pid}`] : [...(row.used_bytes === null ? ["NVML used_bytes null"] : []), ...(row.pytorch!.hook_mode !== "hook" ? [`hook_mode ${row.pytorch!.hook_mode}`] : []), ...(vs?.ok ? [] : [`allocated ${row.pytorch!.allocated_bytes} outside torch's ${JSON.stringify(vs)}`])], { device: row?.device, used_bytes: row?.used_bytes, pytorch: row?.pytorch, against_facts: vs });
  const [a, b] = [samples[0], samples[samples.length - 1]];
  const fig: Record<string, unknown> = { samples: samples.length, note: "the window includes this run's own key presses: 4 screen changes and 2 filters every 5 s" };
  if (a && b && b.t - a.t >= 20) {
    Object.assign(fig, { window_s: +(b.t - a.t).toFixed(1), monitor_cpu_percent_of_a_core: cpuPct(a, b), rss_start_bytes: a.rss_bytes, rss_end_bytes: b.rss_bytes });
    if (a.records !== null && b.records !== null) fig.ring_records_per_second = Math.round((b.records - a.records) / (b.t - a.t));
    if (a.n_alloc !== null && b.n_alloc !== null) fig.allocations_per_second_ring = Math.round((b.n_alloc - a.n_alloc) / (b.t - a.t));
    if (a.num_alloc !== null && b.num_alloc !== null) fig.allocations_per_second_torch = Math.round((b.num_alloc - a.num_alloc) / (b.t - a.t));
    shared.cpuA = fig.monitor_cpu_percent_of_a_core as number;
    shared.recordsPerSecond = fig.ring_records_per_second as number | undefined;
  }
  p.check("resources", "the monitor's CPU and memory over ~60 s of the training, and the allocator events per second", fig.window_s ? [] : [`no window of 20 s or more measured (${samples.length} samples)`], fig);
}

// ---- b: run --json on GPU 1 beside a ---------------------------------------------------------------------
async function partB(p: Part): Promise<void> {
  const { dir, tmp } = place(p);
  const [facts, ndjson] = [join(tmp, "facts.jsonl"), join(tmp, "run.ndjson")];
  const argv = [BUN, CLI, "run", "--json", "--output", ndjson, "--", py, TRAIN, "--seconds", "60", "--facts", facts];
  p.command(`CUDA_VISIBLE_DEVICES=1 ${argv.join(" ")}`);
  const r = await bounded(argv, { env: { ...BASE, GPUMEM_TUI_DIR: dir, CUDA_VISIBLE_DEVICES: "1" }, timeoutMs: p.ms(200_000), file: join(tmp, "out.txt") });
  evidence.add("[b] the training's output", readText(join(tmp, "out.txt")));
  const docs = jsonLines<Document>(ndjson);
  evidence.add(`[b] run.ndjson (${docs.length} documents)`, readText(ndjson));
  const fin = finalOf(facts);
  p.check("exit", "`run --json --output` exits with the program's status 0", r.code === 0 ? [] : [`exit status ${r.code}${r.timedOut ? " (killed at the timeout)" : ""}`], { seconds: r.seconds, steps: fin?.steps, documents: docs.length });
  const rows = docs.flatMap((d) => d.processes.filter((x) => x.pytorch).map((x) => ({ t: d.time_unix_ms / 1000, x })));
  const live = rows.filter((r) => !r.x.exited);
  const nvml = live.filter((r) => r.x.used_bytes !== null).length;
  p.check("nvml", "the process rows carry NVML used bytes (non-null) while it runs", live.length && nvml >= 0.9 * live.length ? [] : [`${nvml} of ${live.length} live rows have NVML used_bytes`], { pid: rows[0]?.x.pid ?? null, nvml_device: rows[0]?.x.device ?? null, live_rows: live.length, with_used_bytes: nvml, hook_mode: rows[0]?.x.pytorch?.hook_mode ?? null, warnings: [...new Set(docs.flatMap((d) => d.warnings))] });
  const fs = steps(facts);
  const vs = live.map((r) => ({ t: +(r.t - (fs[0]?.time ?? r.t)).toFixed(1), ...against(fs, r.t, r.x.pytorch!.allocated_bytes) }));
  const last = rows[rows.length - 1]?.x;
  const fails = vs.filter((v) => !v.ok && v.t > 0).map((v) => `+${v.t} s: ${JSON.stringify(v)}`);
  if (!fin || last?.pytorch?.allocated_bytes !== fin.memory_allocated) fails.push(`at exit the last document says allocated ${last?.pytorch?.allocated_bytes ?? "nothing"}, torch ${fin?.memory_allocated ?? "wrote no final line"}`);
  const warnings = [...new Set(docs.flatMap((d) => d.processes.flatMap((x) => (x.pytorch?.profile?.findings ?? []).filter((f) => f.severity !== "info").map((f) => `${f.id}: ${f.title}`))))];
  p.check("no-false-warning", "no document of a sound training carries a warning or error finding", warnings.slice(0, 5), { documents: docs.length, warnings });
  p.check("allocated", "PyTorch allocated in the NDJSON lies within torch's figures at the nearest step (half the boundary to the peak), and equals torch's at exit", fails.slice(0, 5), { rows: vs.filter((_, i) => i % Math.max(1, Math.floor(vs.length / 12)) === 0), at_exit: { ndjson: last?.pytorch?.allocated_bytes ?? null, torch: fin?.memory_allocated ?? null, exited_flag: last?.exited ?? null } });
}

// ---- c: an idle monitor beside a ---------------------------------------------------------------------------
async function partC(p: Part): Promise<void> {
  const { dir, tmp } = place(p);
  session(p, "c", { GPUMEM_TUI_DIR: dir, TMPDIR: tmp }, `${q(BUN)} ${q(CLI)}`);
  await T.until("c", "[1 Overview]", p.ms(30_000));
  const monitor = children(T.panePid("c") ?? -1)[0];
  if (!monitor) throw new Error("no monitor process under the tmux pane");
  await Bun.sleep(p.ms(5000));
  const a = { t: Date.now() / 1000, ...usage(monitor)! };
  await Bun.sleep(p.ms(30_000));
  const b = { t: Date.now() / 1000, ...usage(monitor)! };
  screens.shot(p, "overview (idle monitor)", T.pane("c"));
  T.keys("c", "q");
  shared.cpuC = cpuPct(a, b);
  p.check("resources", "an idle monitor (no agents) over 30 s: CPU and memory", b.cpu_s === undefined ? ["the monitor was gone"] : [], { window_s: +(b.t - a.t).toFixed(1), monitor_cpu_percent_of_a_core: shared.cpuC, rss_start_bytes: a.rss_bytes, rss_end_bytes: b.rss_bytes });
}

// ---- d: a 2-rank DDP job -------------------------------------------------------------------------------------------
async function partD(p: Part): Promise<void> {
  const { dir, tmp } = place(p);
  const facts = join(tmp, "facts.jsonl");
  const torchrun = existsSync(join(py, "..", "torchrun")) ? q(resolve(py, "..", "torchrun")) : `${q(py)} -m torch.distributed.run`;
  session(p, "d", { GPUMEM_TUI_DIR: dir, TMPDIR: tmp }, `${q(BUN)} ${q(CLI)} run -- ${torchrun} --standalone --nproc_per_node 2 ${q(TRAIN)} --ddp --seconds 60 --facts ${q(facts)}`);
  const pids = await waitFor(() => ended("d", tmp) || (agentPids(dir).length >= 2 && agentPids(dir)), p.ms(180_000), "two ranks' agents");
  const launcher = ppid(pids[0]!) ?? 0;
  p.pids.push(...pids, launcher);
  p.zero = (await waitFor(() => ended("d", tmp) || steps(`${facts}.rank0`)[0], p.ms(120_000), "rank 0's first step")).time;
  const shots: Shot[] = [];
  const visited = new Set<number>();
  let once: Document | null = null;
  for (const at of [15, 40]) {
    await Bun.sleep(p.ms(Math.max(0, (at - p.since()) * 1000)));
    if (!pids.every(alive)) break;
    shots.push(await screens.show(p, "d", "1", "Overview"));
    once ??= await jsonOnce(p, dir);
    for (let i = 0, seen = new Set<number>(); i < 6 && seen.size < pids.length; i++) {
      T.keys("d", "1");
      await T.until("d", "[1 Overview]", 5000).catch(() => "");
      T.keys("d", "g"); // the first row (k is kill)
      await Bun.sleep(40);
      for (let k = 0; k < i; k++) (T.keys("d", "j"), await Bun.sleep(40));
      T.keys("d", "Enter");
      const text = await T.until("d", (t) => t.includes("[2 Process]") && /pid \d+ \[/.test(t), 5000).catch(() => "");
      const pid = Number(/pid (\d+) \[/.exec(text)?.[1]);
      if (!pids.includes(pid) || seen.has(pid)) continue;
      seen.add(pid);
      visited.add(pid);
      await Bun.sleep(1500);
      shots.push(screens.shot(p, `process pid ${pid}`, T.pane("d")));
    }
  }
  const exit = await T.until("d", /exited with status \d+/, p.ms(90_000)).then((t) => Number(/exited with status (\d+)/.exec(t)![1])).catch(() => null);
  shots.push(await screens.show(p, "d", "1", "Overview", "overview (after exit)"));
  T.keys("d", "q");
  evidence.add("[d] torchrun's output", runLog(tmp));
  const job = once?.jobs.find((j) => pids.every((x) => j.pids.includes(x)));
  const ov = shots.filter((s) => s.label === "overview");
  const jobRow = ov.map((s) => lineOf(s.text, /^job\s.*\b2\/2\b/)).find(Boolean) ?? null;
  p.check("overview-job", "the Overview shows the job (2/2 ranks) with both ranks' pids under it", [...(jobRow ? [] : ["no job row with 2/2"]), ...pids.filter((x) => !ov.some((s) => s.text.includes(String(x)))).map((x) => `pid ${x} not in the Overview`)], { job_row: jobRow, pids, json_job: job ? { id: job.id, world_size: job.world_size, pids: job.pids, missing_ranks: job.missing_ranks } : null });
  const rankShots = shots.filter((s) => s.label.startsWith("process pid"));
  const bad = rankShots.filter((s) => PARTIAL.test(s.text));
  p.check("ranks-process", "each rank's Process screen (j/k, Enter) is free of partial", [...pids.filter((x) => !visited.has(x)).map((x) => `pid ${x}'s Process screen never opened`), ...bad.map((s) => `${s.label} at +${s.t} s: ${lineOf(s.text, PARTIAL)}`)], { screens: rankShots.map((s) => s.label) });
  const fails: string[] = [];
  const per = [0, 1].map((rank) => {
    const fs = steps(`${facts}.rank${rank}`);
    const pid = job?.ranks.find((r) => r.rank === rank)?.pid ?? pids[rank]!;
    const mine = once?.processes.filter((x) => x.pid === pid) ?? [];
    const row = mine.find((x) => x.pytorch && x.device === fs[0]?.device) ?? mine.find((x) => x.pytorch);
    const vs = row?.pytorch ? against(fs, once!.time_unix_ms / 1000, row.pytorch.allocated_bytes) : null;
    if (!row) fails.push(`rank ${rank} (pid ${pid}): no PyTorch row`);
    else {
      if (row.device !== fs[0]?.device) fails.push(`rank ${rank}: on NVML device ${row.device}, torch's cuda:${fs[0]?.device}`);
      if (!(row.used_bytes! > 0)) fails.push(`rank ${rank}: NVML used_bytes ${row.used_bytes}`);
      if (!vs?.ok) fails.push(`rank ${rank}: allocated ${row.pytorch!.allocated_bytes} outside torch's ${JSON.stringify(vs)}`);
    }
    return { rank, pid, device: row?.device ?? null, used_bytes: row?.used_bytes ?? null, nvml_rows: mine.map((x) => [x.device, x.used_bytes]), against_facts: vs };
  });
  if (new Set(per.map((r) => r.device)).size !== 2) fails.push(`the ranks are not on two devices: ${per.map((r) => r.device).join(", ")}`);
  p.check("json-once", "--json --once: each rank on its own GPU, NVML used > 0, PyTorch allocated within its facts", once ? fails : ["no JSON document"], { ranks: per });
  p.check("exit", "the DDP job under `run` exits 0", exit === 0 ? [] : [`exit status ${exit ?? "never shown"}`], { steps: [0, 1].map((r) => finalOf(`${facts}.rank${r}`)?.steps ?? null) });
}

// ---- e: a leak and an OOM, side by side ---------------------------------------------------------------
async function partE(p: Part): Promise<void> {
  const { tmp } = place(p);
  const go = (name: string, gpu: string, args: string[]) => {
    const { dir } = place(p, `e-${name}`);
    const argv = [BUN, CLI, "run", "--json", "--output", join(tmp, `${name}.ndjson`), "--", py, TRAIN, ...args, "--facts", join(tmp, `${name}.facts.jsonl`)];
    p.command(`CUDA_VISIBLE_DEVICES=${gpu} ${argv.join(" ")}`);
    return bounded(argv, { env: { ...BASE, GPUMEM_TUI_DIR: dir, CUDA_VISIBLE_DEVICES: gpu }, timeoutMs: p.ms(150_000), file: join(tmp, `${name}.out.txt`) });
  };
  const [leak, oom] = await Promise.all([go("leak", "0", ["--leak", "--seconds", "30"]), go("oom", "1", ["--oom-after", "10", "--seconds", "20"])]);
  for (const n of ["leak", "oom"]) for (const f of [`${n}.out.txt`, `${n}.facts.jsonl`, `${n}.ndjson`]) evidence.add(`[e] ${f}`, ends(readText(join(tmp, f))));
  const view = (n: string) => jsonLines<Document>(join(tmp, `${n}.ndjson`)).flatMap((d) => d.processes.filter((x) => x.pytorch).map((x) => x.pytorch!));
  const ooms = jsonLines<Fact>(join(tmp, "oom.facts.jsonl")).filter((f) => f.oom);
  const counts = view("oom").map((x) => x.oom_count);
  p.check("oom", "--oom-after under `run --json`: exits 0, torch raised the OOM, the NDJSON's oom_count reaches 1", [...(oom.code === 0 ? [] : [`exit status ${oom.code}`]), ...(ooms[0]?.oom ? [] : ["torch raised no OOM"]), ...(Math.max(0, ...counts) >= 1 ? [] : [`oom_count never ≥ 1 (${counts.length} rows)`])], { torch: ooms[0] ?? null, max_oom_count: Math.max(0, ...counts), rows: counts.length });
  const fs = steps(join(tmp, "leak.facts.jsonl"));
  const al = view("leak").map((x) => x.allocated_bytes);
  const [f0, f1] = [fs[0], fs[fs.length - 1]];
  const growth = f0 && f1 ? f1.memory_allocated - f0.memory_allocated : null;
  // What a script reads of the leak: the last document's growth finding against torch's own growth
  // per step (from the facts: memory_allocated at the first and last step boundaries).
  const docs = jsonLines<Document>(join(tmp, "leak.ndjson"));
  // biome-ignore lint: the profile is read defensively
  const prof: any = docs.at(-1)?.processes.find((x) => x.pytorch?.profile)?.pytorch?.profile ?? null;
  const finding = prof?.findings?.find((f: { id: string }) => f.id === "growth") ?? null;
  const truePerStep = f0 && f1 && f1.step! > f0.step! ? (f1.memory_allocated - f0.memory_allocated) / (f1.step! - f0.step!) : null;
  const named = finding ? Number(finding.numbers.growth_per_step_bytes) : null;
  const off = named !== null && truePerStep ? Math.abs(named - truePerStep) / truePerStep : null;
  p.check("leak-named", "run --json's last document names the growth per step within 1% of torch's, with its category and where it was allocated", [
    ...(finding ? [] : ["no growth finding in the last document's profile"]),
    ...(off !== null && off <= 0.01 ? [] : [`growth per step ${named} against torch's ${truePerStep} (${off === null ? "n/a" : `${(off * 100).toFixed(2)}%`})`]),
    ...(finding && /growth is in \w+/.test(finding.evidence) ? [] : ["the evidence names no category"]),
  ], { finding, torch_growth_per_step_bytes: truePerStep, relative_difference: off, program: docs.at(-1)?.program ?? null });
  p.check("leak", "--leak under `run --json`: exits 0; allocated grows in torch's facts and in the NDJSON", [...(leak.code === 0 ? [] : [`exit status ${leak.code}`]), ...(growth !== null && growth > 0 ? [] : [`torch's allocated did not grow (${growth})`]), ...(al.length > 1 && al[al.length - 1]! > al[0]! ? [] : ["the NDJSON's allocated did not grow"])], { torch_growth_bytes: growth, torch_growth_bytes_per_second: f0 && f1 && growth !== null ? Math.round(growth / Math.max(1e-9, f1.time - f0.time)) : null, ndjson_first_last: [al[0] ?? null, al[al.length - 1] ?? null] });
}

// ---- f, g: a recording for a fixture, and its replay -----------------------------------------------------
const rec: { ring?: string; head?: string; facts?: string } = {};
async function partF(p: Part): Promise<void> {
  const { dir, tmp } = place(p);
  const facts = join(tmp, "facts.jsonl");
  const CAP = 8_388_608;
  // As long as the ring holds without lapping, at the rate part a saw (25 s at most).
  const seconds = shared.recordsPerSecond ? Math.max(5, Math.min(25, Math.floor((0.8 * CAP) / shared.recordsPerSecond))) : 25;
  const { agentEnv } = await import("../../src/launch");
  const env = agentEnv({ ...BASE, GPUMEM_TUI_DIR: dir, GPUMEM_TUI_KEEP: "1", GPUMEM_TUI_RING_CAPACITY: String(CAP), CUDA_VISIBLE_DEVICES: "0" });
  const argv = [py, TRAIN, "--seconds", String(seconds), "--facts", facts];
  p.command(`GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR=${dir} GPUMEM_TUI_RING_CAPACITY=${CAP} CUDA_VISIBLE_DEVICES=0 PYTHONPATH=${env.PYTHONPATH} ${argv.join(" ")}`);
  const t0 = Date.now();
  const proc = Bun.spawn(argv, { cwd: ROOT, env, stdin: "ignore", stdout: Bun.file(join(tmp, "out.txt")), stderr: Bun.file(join(tmp, "err.txt")) });
  p.pids.push(proc.pid);
  const done = proc.exited;
  const early = () => {
    if (proc.exitCode !== null) throw new Error(`the program ended early (${proc.exitCode}): ${readText(join(tmp, "err.txt")).slice(-3000)}`);
    return false;
  };
  await waitFor(() => early() || (existsSync(join(dir, `${proc.pid}.json`)) && steps(facts).length >= 3 && Date.now() - t0 >= 8000), p.ms(120_000), "the agent and three steps");
  const ringPath = join(dir, `${proc.pid}.ring`);
  const before = ringHeader(ringPath)?.write_index ?? null;
  const { command } = await import("../../src/collect/control");
  const reply = await command(join(dir, `${proc.pid}.sock`), "names", { at_step: true }, 20_000);
  const after = ringHeader(ringPath)?.write_index ?? null;
  writeFileSync(join(OUT, "hf-gpt2.names.json"), `${JSON.stringify({ names: reply.tensors ?? null, write_index: after, write_index_before: before, time: Date.now() / 1000, ok: reply.ok, error: reply.error ?? null })}\n`);
  const code = await Promise.race([done, Bun.sleep(p.ms((seconds + 60) * 1000)).then(() => null)]);
  evidence.add("[f] the training's output", readText(join(tmp, "out.txt")) + readText(join(tmp, "err.txt")));
  copyFileSync(facts, join(OUT, "hf-gpt2.facts.jsonl"));
  const manifest = JSON.parse(readText(join(dir, `${proc.pid}.json`)) || "{}");
  for (const d of [OUT, tmp]) writeFileSync(join(d, "hf-gpt2.json"), `${JSON.stringify({ ...manifest, ring: "hf-gpt2.ring", socket: null }, null, 1)}\n`);
  const h = ringHeader(ringPath);
  const fig: Record<string, unknown> = { seconds, exit: code, pid: proc.pid, write_index: h?.write_index, capacity: h?.capacity, names: Array.isArray(reply.tensors) ? reply.tensors.length : reply.error, names_write_index: after };
  const fails = [...(code === 0 ? [] : [`exit status ${code ?? "(still running at the timeout)"}`]), ...(reply.ok ? [] : [`names: ${reply.error}`])];
  if (h && h.write_index <= h.capacity) {
    rec.ring = join(tmp, "hf-gpt2.ring");
    rec.facts = facts;
    const cut = (n: number, to: string) => bounded([BUN, join(ROOT, "bench", "ring-cut.ts"), ringPath, to, String(n)], { timeoutMs: p.ms(120_000) });
    fig.compact = lastLine((await cut(h.write_index, rec.ring)).out);
    const pack = async (ring: string) => {
      const xz = Bun.which("xz");
      const to = join(OUT, xz ? "hf-gpt2.ring.xz" : "hf-gpt2.ring.gz");
      if (xz) await bounded([xz, "-T0", "-6", "-c", ring], { timeoutMs: p.ms(150_000), file: to });
      else writeFileSync(to, Bun.gzipSync(await Bun.file(ring).bytes(), { level: 9 }));
      return { to, size: statSync(to).size };
    };
    // Files that come back from the GPU machine are at most 16 MB: where the whole ring would
    // compress to more (estimated from its first 2^20 records), the fixture is its head.
    const W = h.write_index;
    let n = W;
    const head = join(tmp, "head", "hf-gpt2.ring");
    mkdirSync(join(tmp, "head"), { recursive: true });
    copyFileSync(join(tmp, "hf-gpt2.json"), join(tmp, "head", "hf-gpt2.json"));
    if (W > 1 << 20) {
      await cut(1 << 20, head);
      const perRecord = (await pack(head)).size / (1 << 20);
      fig.estimated_compressed_bytes = Math.round(perRecord * W);
      if (perRecord * W > 14e6) n = Math.min(W, Math.floor(14e6 / perRecord));
    }
    let packed: { size: number };
    for (;;) {
      if (n < W) fig.head = lastLine((await cut(n, head)).out);
      packed = await pack(n < W ? head : rec.ring);
      Object.assign(fig, { records_kept: n, compressed_bytes: packed.size, names_within: after !== null && after <= n });
      if (packed.size <= 15e6 || n <= 1024) break;
      n = Math.floor(n * 0.75);
    }
    if (n < W) rec.head = head;
    if (packed.size > 15e6) fails.push(`the compressed ring is ${packed.size} bytes, above 15 MB`);
  } else fails.push(h ? `the ring lapped: ${h.write_index} records into ${h.capacity} (lower --seconds or raise the capacity)` : "the ring could not be read");
  p.check("recording", "a recording of the training (ring, manifest, names asked for mid-run, facts) for a fixture", fails, fig);
}

async function partG(p: Part): Promise<void> {
  if (!rec.ring || !rec.facts) throw new Error("skipped: no recording (part f)");
  for (const [label, ring] of [["ring", rec.ring], ["head", rec.head]] as const) {
    if (!ring) continue;
    p.command(`${BUN} ${CLI} replay ${ring} --json`);
    const r = await bounded([BUN, CLI, "replay", ring, "--json"], { timeoutMs: p.ms(150_000) });
    // biome-ignore lint: the final line is read defensively (fields being added)
    let fin: any = null;
    try {
      fin = JSON.parse(lastLine(r.out));
    } catch {
      // below
    }
    evidence.add(`[g] replay ${label}: final line`, fin ? JSON.stringify(fin, null, 1) : `exit ${r.code}: ${r.err}`);
    if (fin?.type !== "final") {
      p.check(`${label}-replay`, `replay of the ${label} ends with its final line`, [`no final line (exit ${r.code}): ${lastLine(r.err)}`]);
      continue;
    }
    const devs: any[] = fin.summary?.devices ?? [];
    const f1 = { lost_records: fin.summary?.lost_records ?? fin.lost_records ?? "absent", events: fin.events, devices: devs.map((d) => ({ device: d.device, partial: d.partial ?? "absent", partial_causes: d.partial_causes ?? "absent", unaccounted_bytes: d.unaccounted_bytes })) };
    p.check(`${label}-whole`, `replay of the ${label}: no record lost, block detail not partial`, [...(f1.lost_records === 0 ? [] : [`lost_records ${f1.lost_records}`]), ...devs.filter((d) => d.partial !== false).map((d) => `device ${d.device}: partial ${d.partial ?? "absent"} (${JSON.stringify(d.partial_causes ?? "causes absent")})`)], f1);
    if (label === "head") continue;
    const sync = devs.map((d) => ({ device: d.device, sync: d.sync ?? "absent" }));
    p.check("sync", "replay: block detail agrees with torch's exact allocated at every step boundary (summary.devices[*].sync)", sync.flatMap((s) => (typeof s.sync !== "object" ? [`device ${s.device}: sync absent`] : s.sync.disagreed !== 0 || !(s.sync.checks > 0) ? [`device ${s.device}: ${JSON.stringify(s.sync)}`] : [])), { sync });
    const facts = new Map(steps(rec.facts).map((f) => [f.step!, f]));
    const lines: any[] = (fin.devices ?? []).flatMap((d: any) => (d.steps ?? []).filter((s: any) => s.complete !== false && d.device === (facts.values().next().value?.device ?? 0)));
    // A model step k ends with the k+1-th optimizer step (facts' step k+1); offset 0 is tried too.
    const cmp = (off: number) => lines.map((s) => ({ step: s.step, facts_step: s.step + off, torch_allocated_at_end_bytes: s.torch_allocated_at_end_bytes ?? "absent", allocated_at_end_bytes: s.allocated_at_end_bytes ?? s.held_at_end_bytes ?? "absent", facts_memory_allocated: facts.get(s.step + off)?.memory_allocated ?? null })).filter((x) => x.facts_memory_allocated !== null);
    const eq = (xs: ReturnType<typeof cmp>) => xs.filter((x) => x.torch_allocated_at_end_bytes === x.facts_memory_allocated).length;
    const [c0, c1] = [cmp(0), cmp(1)];
    const off = eq(c0) > eq(c1) ? 0 : 1;
    const rows = off === 0 ? c0 : c1;
    const mism = rows.filter((x) => x.torch_allocated_at_end_bytes !== "absent" && x.torch_allocated_at_end_bytes !== x.facts_memory_allocated);
    p.check("steps-torch", "replay: each step's torch_allocated_at_end_bytes equals the facts' memory_allocated of the same step", [...(rows.length ? [] : ["no step of the replay matches a step of the facts"]), ...(rows[0]?.torch_allocated_at_end_bytes === "absent" ? ["torch_allocated_at_end_bytes absent"] : mism.length ? [`${mism.length} of ${rows.length} steps differ, e.g. ${JSON.stringify(mism[0])}`] : [])], { steps_compared: rows.length, facts_step_offset: off, mismatches: mism.length, model_equal_to_torch: rows.filter((x) => x.allocated_at_end_bytes === x.facts_memory_allocated).length, first: rows.slice(0, 3), mismatch_examples: mism.slice(0, 5) });
  }
}

// ---- the run ------------------------------------------------------------------------------------------------
function report(): void {
  writeReport(OUT, { title: "gpumem-tui on a Hugging Face training (GPT-2), end to end", command: `bun test/gpu/e2e-hf.ts ${argv[0]}`, machine, results, extra: { parts }, commands, footer: "Screens: screens.txt; outputs, JSON documents and NDJSON: evidence.txt; the recording: hf-gpt2.*." });
}
function cleanUp(): void {
  stopChildren();
  for (const pid of made.flatMap(agentPids)) kill(pid);
  T.kill();
  for (const d of [...made, WORK]) rmSync(d, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => (cleanUp(), report(), say(`interrupted; the report so far is in ${OUT}`), process.exit(130)));

const left = () => DEADLINE - Date.now();
const budget = (want: number, need: number) => (left() >= need ? Math.min(want, left()) : 0);
async function part(id: string, title: string, want: number, need: number, fn: (p: Part) => Promise<void>) {
  const ms = budget(want, need);
  if (ms) await runPart(id, title, ms, fn, stop);
  else results.push({ part: id, name: `${id}.run`, title, passed: false, failures: [`skipped: ${Math.round(left() / 1000)} s left of the run, ${need / 1000} s needed`], figures: {} });
  report();
}
say(`e2e:hf on ${machine.host}: ${(machine.gpus as string[]).length} GPUs, torch ${machine.torch}, transformers ${machine.transformers}; report in ${OUT}`);
await part("setup", "the allocator hook, built (or found) for this torch", 240_000, 30_000, async (p) => {
  const r = await bounded([py, "-c", "import sys, torch; sys.path.insert(0, sys.argv[1]); from gpumem_agent import build; print(build.hook_library(torch))", join(ROOT, "agent")], { env: BASE, timeoutMs: p.ms(240_000) });
  p.check("hook", "the allocator hook builds against this torch (else the agent polls)", r.code === 0 ? [] : [`exit ${r.code}: ${r.err.trim().slice(-2000)}`], { library: lastLine(r.out), seconds: r.seconds });
});
await Promise.all([
  part("a", "the screens on a GPT-2 training (tmux 200×60, GPU 0)", 170_000, 120_000, partA),
  part("b", "`run --json` on the same program (GPU 1)", 170_000, 120_000, partB),
  part("c", "an idle monitor (no agents)", 80_000, 60_000, partC),
]);
if (shared.cpuA !== undefined && shared.cpuC !== undefined) {
  const cost = +(shared.cpuA - shared.cpuC).toFixed(2);
  results.push({ part: "a", name: "a.following-cost", title: "following the busy process costs the monitor at most 10% of a core more than idle", passed: cost <= 10, failures: cost <= 10 ? [] : [`${cost}% of a core`], figures: { busy_percent: shared.cpuA, idle_percent: shared.cpuC, difference_percent: cost, ratio: +(shared.cpuA / Math.max(0.01, shared.cpuC)).toFixed(2) } });
}
await part("d", "a 2-rank DDP job under torchrun (both GPUs)", 160_000, 100_000, partD);
await part("e", "a leak (GPU 0) and an OOM (GPU 1) under `run --json`", 120_000, 60_000, partE);
await part("f", "a recording for a fixture", 150_000, 60_000, partF);
await part("g", "the recording replayed", 90_000, 10_000, partG);
cleanUp();
report();
const failed = results.filter((r) => !r.passed);
say(`${results.length - failed.length} of ${results.length} checks passed; ${join(OUT, "REPORT.md")}`);
process.exit(failed.length ? 1 : 0);
