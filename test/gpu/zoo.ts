#!/usr/bin/env bun
// The zoo: real training set-ups, each run twice on the same GPU(s), plain (`python prog.py`) and
// under `gpumem-tui run --json --output F.ndjson`, to show that the agent never harms the program:
//   bun test/gpu/zoo.ts OUT_DIR [--scale X] [--budget SECONDS] [--only ID,ID] [--serial]
// For each set-up: exit status 0 both ways, the same output (test/gpu/zoo/*.py print only what repeats
// on the same GPU), nothing of ours on stderr, the final document's allocated and reserved equal to
// torch's own at the end (each program's last line, TORCH_TOTALS), no warning on a sound program
// (and the expected one on a leak and an OOM), no note of a feature turned off, detail not partial.
// Set-ups on several GPUs run first, one at a time; then one set-up per GPU at a time, its two runs
// side by side. Writes OUT_DIR/ZOO.md (the table, the command at its top), zoo.json, and runs/ (each
// run's stdout and stderr, the final document, the NDJSON's tail, the manifests). Exit status 0 when
// every set-up passed or was skipped, 1 when one failed, 2 when this machine cannot run it.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { BUN, CLI, findPython, gitCommit, lastLine, probeGpus, probeTorch, ROOT, say } from "./e2e-support";
import { killAll, markdown, runZoo, spawnBounded, type Setup, type ZooRow } from "./zoo-support";

const SETUPS: Setup[] = [
  { id: "fsdp2", title: "FSDP2 (fully_shard per GPT-2 block), AdamW, torchrun on every GPU", program: ["test/gpu/zoo/fsdp2.py"], launch: "torchrun", gpus: "all", steps: ["--steps", 400], needs: ["transformers"], timeoutS: 150, estimateS: 45 },
  { id: "ddp", title: "DDP, GPT-2, AdamW, torchrun on every GPU", program: ["test/gpu/zoo/ddp.py"], launch: "torchrun", gpus: "all", steps: ["--steps", 800], needs: ["transformers"], timeoutS: 150, estimateS: 45 },
  { id: "two-gpus", title: "two GPUs in one process (GPT-2's blocks split across cuda:0 and cuda:1)", program: ["test/gpu/zoo/two_gpus.py"], launch: "python", gpus: "two", steps: ["--steps", 800], needs: ["transformers"], timeoutS: 150, estimateS: 35 },
  { id: "compile", title: "torch.compile (default mode), GPT-2 training", program: ["test/gpu/zoo/compiled.py", "--mode", "default"], launch: "python", gpus: "one", steps: ["--steps", 1000], needs: ["transformers"], timeoutS: 300, estimateS: 80 },
  { id: "compile-cudagraphs", title: 'torch.compile(mode="reduce-overhead") (CUDA graphs), GPT-2 training', program: ["test/gpu/zoo/compiled.py", "--mode", "reduce-overhead"], launch: "python", gpus: "one", steps: ["--steps", 1000], needs: ["transformers"], timeoutS: 300, estimateS: 100 },
  { id: "checkpointing", title: "activation checkpointing (gradient_checkpointing_enable, non-reentrant)", program: ["test/gpu/zoo/checkpointing.py"], launch: "python", gpus: "one", steps: ["--steps", 800], needs: ["transformers"], timeoutS: 150, estimateS: 30 },
  { id: "trainer", title: "transformers Trainer: bf16, gradient_accumulation_steps=4, 2 DataLoader workers", program: ["test/gpu/zoo/trainer.py"], launch: "python", gpus: "one", steps: ["--steps", 100], needs: ["transformers"], timeoutS: 180, estimateS: 40 },
  { id: "lora", title: "PEFT LoRA on GPT-2", program: ["test/gpu/zoo/lora.py"], launch: "python", gpus: "one", steps: ["--steps", 1000], needs: ["transformers", "peft"], timeoutS: 150, estimateS: 35 },
  { id: "generate", title: "generate() under torch.inference_mode (greedy)", program: ["test/gpu/zoo/generate.py"], launch: "python", gpus: "one", steps: ["--rounds", 40], needs: ["transformers"], timeoutS: 150, estimateS: 30 },
  { id: "expandable", title: "expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), batches of varying length", program: ["test/gpu/zoo/expandable.py"], launch: "python", gpus: "one", steps: ["--steps", 1000], env: { PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True" }, needs: ["transformers"], timeoutS: 150, estimateS: 30 },
  // Takes the whole GPU on purpose: its two runs one after the other, never beside another set-up.
  { id: "oom-retry", title: "an OOM caught and retried (fill until OutOfMemoryError, then halve the batch until a step fits)", program: ["test/gpu/zoo/oom_retry.py"], launch: "python", gpus: "one", steps: ["--steps", 300], needs: ["transformers"], serial: true, expect: ["oom"], allow: ["reserved_unallocated"], timeoutS: 150, estimateS: 50 },
  { id: "leak", title: "a leak (every step's logits kept in a list): a growth finding expected", program: ["test/gpu/zoo/leak.py"], launch: "python", gpus: "one", steps: ["--steps", 400], needs: ["transformers"], expect: ["growth"], timeoutS: 150, estimateS: 30 },
];

const USAGE = `usage: bun test/gpu/zoo.ts OUT_DIR [--scale X] [--budget SECONDS] [--only ID,ID] [--serial]

Runs each set-up of the zoo plain and under \`gpumem-tui run --json\` on this machine's NVIDIA GPUs
and says, set-up by set-up, whether the agent changed anything; writes OUT_DIR/ZOO.md and zoo.json.
  --scale X         steps of every set-up times X (default 1: a few seconds of steps each)
  --budget SECONDS  every run ends by then; set-ups not begun in time are skipped (default 420)
  --only ID,ID      these set-ups only (${SETUPS.map((s) => s.id).join(", ")})
  --serial          the plain run, then the agent's (default: side by side on the same GPU)
Needs PyTorch with CUDA and transformers (python3, or the interpreter named by PYTHON); peft for lora.
Exit status: 0 no set-up failed, 1 one failed, 2 this machine cannot run it.
`;

const fail = (msg: string) => (process.stderr.write(`zoo: ${msg}\n\n${USAGE}`), process.exit(2));
const argv = process.argv.slice(2);
if (argv.includes("-h") || argv.includes("--help")) (process.stdout.write(USAGE), process.exit(0));
let outArg: string | undefined;
let scale = 1;
let budgetS = 420;
let only: string[] | null = null;
let serial = false;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i]!;
  const value = () => argv[++i] ?? fail(`${a} needs a value`);
  if (a === "--scale") scale = Number(value());
  else if (a === "--budget") budgetS = Number(value());
  else if (a === "--only") only = value().split(",");
  else if (a === "--serial") serial = true;
  else if (a.startsWith("-")) fail(`unknown option ${a}`);
  else if (outArg === undefined) outArg = a;
  else fail(`unexpected argument ${a}`);
}
if (outArg === undefined) fail("OUT_DIR is missing");
if (!(scale > 0 && scale <= 100)) fail(`--scale takes a number above 0 and at most 100 (got ${scale})`);
if (!(budgetS >= 30 && budgetS <= 3600)) fail(`--budget takes seconds from 30 to 3600 (got ${budgetS})`);
const unknown = (only ?? []).filter((id) => !SETUPS.some((s) => s.id === id));
if (unknown.length) fail(`--only: no set-up ${unknown.join(", ")}`);
const OUT = resolve(outArg!);
const T0 = Date.now();
const DEADLINE = T0 + budgetS * 1000;

// ---- what this machine has ------------------------------------------------------------------------
const PYTHON_NAME = process.env.PYTHON || "python3";
// Every run's environment: ours, without what would steer the agent or the GPUs elsewhere.
const BASE: Record<string, string> = { PYTHONUNBUFFERED: "1", NO_COLOR: "1", CUDA_DEVICE_ORDER: "PCI_BUS_ID", TOKENIZERS_PARALLELISM: "false" };
for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !["CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"].includes(k) && !k.startsWith("GPUMEM_TUI_")) BASE[k] ??= v;
const machine: Record<string, unknown> = { date: new Date().toISOString(), host: hostname(), commit: gitCommit(), bun: Bun.version };
const missing: string[] = [];
const gpu = probeGpus();
Object.assign(machine, { gpus: gpu.gpus, driver: gpu.driver });
if (gpu.missing) missing.push(gpu.missing);
const PY = findPython(PYTHON_NAME);
const missingModules = new Set<string>();
if (!PY) missing.push(`no torch: no Python interpreter "${PYTHON_NAME}" (set PYTHON to one that has torch and transformers)`);
else {
  const t = probeTorch(PY, BASE, ["transformers", "peft"]);
  Object.assign(machine, t.info);
  for (const m of ["transformers", "peft"]) if (t.info[m] === null) missingModules.add(m);
  // torch and CUDA are needed by every set-up; a missing module skips those that need it.
  missing.push(...t.missing.filter((x) => x.startsWith("no torch")));
}
if (missing.length) {
  process.stderr.write(`zoo: cannot run on this machine; nothing was started:\n${missing.map((m) => `  - ${m}\n`).join("")}It runs training set-ups on NVIDIA GPUs: run it where there are GPUs and PyTorch with CUDA.\n`);
  process.exit(2);
}
const py = PY!;

// ---- the run ------------------------------------------------------------------------------------------
const command = `${basename(BUN)} test/gpu/zoo.ts ${argv.join(" ")}`.trim();
const RUNS = join(OUT, "runs");
mkdirSync(RUNS, { recursive: true });
// Not named after the product: the programs' warnings quote these paths, and stderr is searched for our name.
const WORK = mkdtempSync(join(tmpdir(), "zoo-"));
const setups = SETUPS.filter((s) => !only || only.includes(s.id));
const gpus = gpu.gpus.map((_, i) => i);
const rows: ZooRow[] = [];
const notes = [
  "Each set-up's two runs share its GPU(s) and run side by side (the OOM one after the other), so the walls compare like with like but include each other's load.",
  "Every run has its own TMPDIR, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (both compile from cold); the agent's files are in a directory of the run's own, kept at exit (GPUMEM_TUI_KEEP=1) for the manifests' notes.",
  "allocated / reserved: the final document's figures of each process and device against torch's own, printed by the program after gc.collect() and torch.cuda.synchronize() as its last act (TORCH_TOTALS).",
  "torch same w/o agent: torch's own totals at the end equal with and without the agent (informative, not a check).",
  "The allocator hook is built once before the first run under the agent (a cold cache otherwise builds it in the first program).",
];

function report(): void {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const done = setups.flatMap((s) => byId.get(s.id) ?? []);
  const rep = { command, machine: { ...machine, seconds: Math.round((Date.now() - T0) / 1000) }, rows: done, notes };
  writeFileSync(join(OUT, "zoo.json"), `${JSON.stringify({ ...rep, passed: done.every((r) => r.status !== "FAIL") }, null, 1)}\n`);
  writeFileSync(join(OUT, "ZOO.md"), markdown(rep));
}
function cleanUp(): void {
  killAll();
  rmSync(WORK, { recursive: true, force: true });
}
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => (cleanUp(), report(), say(`interrupted; the report so far is in ${OUT}`), process.exit(130)));

say(`zoo on ${machine.host}: ${gpus.length} GPU(s), torch ${machine.torch}, transformers ${machine.transformers ?? "none"}, peft ${machine.peft ?? "none"}; ${setups.length} set-ups, budget ${budgetS} s; report in ${OUT}`);
// The hook, built (or found in the cache) once, beside the first plain runs.
const hook = spawnBounded([py, "-c", "import sys, torch; sys.path.insert(0, sys.argv[1]); from gpumem_agent import build; print(build.hook_library(torch))", join(ROOT, "agent")], {
  env: BASE,
  cwd: ROOT,
  timeoutMs: 240_000,
  stdout: join(WORK, "hook.out"),
  stderr: join(WORK, "hook.err"),
}).then(async (r) => {
  const out = await Bun.file(join(WORK, "hook.out")).text().catch(() => "");
  const err = await Bun.file(join(WORK, "hook.err")).text().catch(() => "");
  machine.hook = r.exit === 0 ? `${lastLine(out)} (${r.seconds} s)` : `build failed (exit ${r.exit}): ${lastLine(err)}; the agent polls`;
  say(`hook: ${machine.hook}`);
});
await runZoo(
  setups,
  { python: py, cli: [BUN, CLI], root: ROOT, work: WORK, runs: RUNS, env: BASE, gpus, scale, deadline: DEADLINE, serial, missingModules, beforeAgent: hook, log: say },
  (r) => (rows.push(r), report()),
);
cleanUp();
report();
const failed = rows.filter((r) => r.status === "FAIL");
say(`${rows.filter((r) => r.status === "PASS").length} passed, ${failed.length} failed, ${rows.filter((r) => r.status === "SKIP").length} skipped in ${Math.round((Date.now() - T0) / 1000)} s; ${join(OUT, "ZOO.md")}`);
process.exit(failed.length ? 1 : 0);
