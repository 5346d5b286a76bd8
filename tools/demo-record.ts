#!/usr/bin/env bun
// Records the demo on a GPU machine (run it there; it writes what demo/ ships):
//   bun tools/demo-record.ts OUT_DIR [--seconds 30] [--python /opt/torch/.venv/bin/python3] [--max-mb 2]
// A transformers GPT-2 training (test/gpu/hf_gpt2.py, 124M parameters) with the agent keeping its
// ring (large enough not to lap), the names asked mid-run (right after an optimizer step), and
// beside it this checkout's monitor writing `--json --interval 500` documents (NVML and /proc,
// per-process SM % included); then tools/demo-make.ts cuts the ring to --max-mb compressed and
// makes the NVML track. Each part is bounded; a part that fails is logged and the next still runs.
// OUT_DIR gets: demo/ (demo.ring.gz, demo.json, demo.names.json, demo.nvml.ndjson: copy it over
// the checkout's demo/), nvml.ndjson (whole), facts.jsonl, log.txt, nvidia-smi-q.txt.
import { appendFileSync, copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { command } from "../src/collect/control";
import { agentEnv } from "../src/launch";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: string) => {
  const i = argv.indexOf(name);
  return i < 0 ? dflt : argv.splice(i, 2)[1]!;
};
const seconds = Number(opt("--seconds", "30"));
const python = opt("--python", existsSync("/opt/torch/.venv/bin/python3") ? "/opt/torch/.venv/bin/python3" : "python3");
const maxMb = opt("--max-mb", "2"); // what the package ships: about 6 s of steps of the GPT-2 run
if (argv.length !== 1 || !(seconds > 0)) {
  process.stderr.write("usage: bun tools/demo-record.ts OUT_DIR [--seconds 30] [--python PY] [--max-mb 2]\n");
  process.exit(2);
}
const OUT = resolve(argv[0]!);
const ROOT = resolve(import.meta.dir, "..");
mkdirSync(OUT, { recursive: true });
const LOG = join(OUT, "log.txt");
const log = (s: string) => (appendFileSync(LOG, `${new Date().toISOString()} ${s}\n`), process.stdout.write(`${s}\n`));
const dir = mkdtempSync(join(tmpdir(), "gpumem-demo-agents-"));
const tmp = mkdtempSync(join(tmpdir(), "gpumem-demo-"));

async function part(name: string, fn: () => Promise<void>): Promise<void> {
  log(`[${name}] start`);
  try {
    await fn();
    log(`[${name}] done`);
  } catch (e) {
    log(`[${name}] FAILED: ${(e as Error).stack ?? e}`);
  }
}

/** A command with a deadline; its output to a file. */
async function bounded(cmd: string[], timeoutS: number, out: string, env?: Record<string, string>): Promise<number | null> {
  const p = Bun.spawn(cmd, { cwd: ROOT, env, stdout: Bun.file(out), stderr: "pipe" });
  const code = await Promise.race([p.exited, Bun.sleep(timeoutS * 1000).then(() => null)]);
  if (code === null) p.kill("SIGKILL");
  const err = await new Response(p.stderr).text();
  if (err.trim()) log(`${cmd[0]} stderr: ${err.trim().slice(-2000)}`);
  return code;
}

let pid: number | null = null;
await part("nvidia-smi", async () => void (await bounded(["nvidia-smi", "-q"], 20, join(OUT, "nvidia-smi-q.txt"))));

await part("record", async () => {
  // The monitor first: the track begins before the process exists (the Overview's empty GPU).
  const monitor = Bun.spawn([process.execPath, join(ROOT, "src", "cli.ts"), "--json", "--interval", "500"], {
    cwd: ROOT,
    env: { ...process.env, GPUMEM_TUI_DIR: dir } as Record<string, string>,
    stdout: Bun.file(join(OUT, "nvml.ndjson")),
    stderr: Bun.file(join(tmp, "monitor.err")),
  });
  try {
    await train();
  } finally {
    monitor.kill("SIGINT");
    await Promise.race([monitor.exited, Bun.sleep(5000)]);
  }
});

async function train(): Promise<void> {
  await Bun.sleep(3000);
  const facts = join(OUT, "facts.jsonl");
  const env = agentEnv({ ...process.env, GPUMEM_TUI_DIR: dir, GPUMEM_TUI_KEEP: "1", GPUMEM_TUI_RING_CAPACITY: String(1 << 22), CUDA_VISIBLE_DEVICES: process.env.CUDA_VISIBLE_DEVICES ?? "0", PYTHONUNBUFFERED: "1" });
  const proc = Bun.spawn([python, join(ROOT, "test", "gpu", "hf_gpt2.py"), "--seconds", String(seconds), "--layers", "12", "--embd", "768", "--heads", "12", "--batch", "16", "--seq", "512", "--facts", facts], {
    cwd: ROOT,
    env,
    stdout: Bun.file(join(tmp, "train.out")),
    stderr: Bun.file(join(tmp, "train.err")),
  });
  pid = proc.pid;
  // Names right after an optimizer step, once three steps are done (parameters, .grad, AdamW state).
  const t0 = Date.now();
  while (Date.now() - t0 < 240_000 && proc.exitCode === null) {
    const steps = existsSync(facts) ? readFileSync(facts, "utf8").split("\n").filter(Boolean).length : 0;
    if (steps >= 3 && existsSync(join(dir, `${pid}.sock`))) break;
    await Bun.sleep(200);
  }
  const ring = join(dir, `${pid}.ring`);
  const reply = await command(join(dir, `${pid}.sock`), "names", { at_step: true }, 20_000);
  log(`names: ${reply.ok ? `${(reply.tensors as unknown[]).length} tensors at record ${reply.write_index}` : reply.error}`);
  if (reply.ok) writeFileSync(join(tmp, "run.names.json"), JSON.stringify({ names: reply.tensors, write_index: reply.write_index }));
  // The monitor beside the training removes an exited agent's files: a hard link keeps the ring
  // (the agent goes on writing the same file), and the manifest is taken now (its ranges are known).
  if (existsSync(ring)) linkSync(ring, join(tmp, "run.ring"));
  copyFileSync(join(dir, `${pid}.json`), join(tmp, "run.json"));
  const code = await Promise.race([proc.exited, Bun.sleep((seconds + 240) * 1000).then(() => null)]);
  if (code === null) proc.kill("SIGTERM");
  log(`training exit ${code}; ${readFileSync(join(tmp, "train.out"), "utf8").split("\n").slice(-3).join(" | ")}`);
  await Bun.sleep(2000); // the track ends after the process
  appendFileSync(LOG, `train stderr (tail): ${readFileSync(join(tmp, "train.err"), "utf8").slice(-2000)}\n`);
  if (!existsSync(join(tmp, "run.ring"))) copyFileSync(ring, join(tmp, "run.ring"));
}

await part("demo-make", async () => {
  const code = await bounded([process.execPath, join(ROOT, "bench", "demo-make.ts"), join(tmp, "run.ring"), join(OUT, "nvml.ndjson"), join(OUT, "demo"), "--max-mb", maxMb], 300, join(tmp, "make.out"));
  log(`demo-make exit ${code}: ${readFileSync(join(tmp, "make.out"), "utf8").trim()}`);
});

await part("check", async () => {
  // The demo as a newcomer gets it: the replay of the shipped files to the end, without a loss.
  const code = await bounded([process.execPath, join(ROOT, "src", "cli.ts"), "replay", join(OUT, "demo", "demo.ring.gz"), "--json"], 300, join(tmp, "replay.ndjson"));
  const last = readFileSync(join(tmp, "replay.ndjson"), "utf8").trim().split("\n").at(-1) ?? "{}";
  const s = JSON.parse(last).summary?.devices?.[0];
  log(`replay exit ${code}: step ${s?.step}, allocated ${s?.allocated_bytes}, partial ${s?.partial} ${JSON.stringify(s?.partial_causes ?? [])}`);
});
