// Where `gpumem-tui --json --once` stands against its floors, in one run: Bun starting and ending
// with nothing to do, the least Bun program that prints NVML's numbers (bench/start-floor-nvml.ts),
// a C program that starts NVML and reads memory and utilization (bench/nvml_exit.c), the monitor's
// one-shot, and nvidia-smi with the same fields. Each a fresh process, spawn to exit, interleaved,
// with a process holding 3 GiB on the GPU (as bench/start-compare.ts runs them).
//   bun bench/start-floor.ts OUT_DIR [REPS]
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { SMI_FIELDS } from "./smi-fields";

const [outArg, repsArg] = process.argv.slice(2);
if (!outArg) {
  process.stderr.write("usage: bun bench/start-floor.ts OUT_DIR [REPS]\n");
  process.exit(2);
}
const OUT = resolve(outArg);
const REPS = Number(repsArg ?? 30);
const root = resolve(import.meta.dir, "..");
mkdirSync(OUT, { recursive: true });
const build = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: root, stdout: "pipe", stderr: "pipe" });
if (build.exitCode !== 0) throw new Error(`bun run build:bundle failed: ${build.stderr}`);
const cBin = join(OUT, "nvml_exit");
const cc = Bun.spawnSync(["cc", "-O2", join(root, "bench", "nvml_exit.c"), "-o", cBin, "-ldl"], { stdout: "pipe", stderr: "pipe" });
if (cc.exitCode !== 0) throw new Error(`cc bench/nvml_exit.c failed: ${cc.stderr}`);
const bun = process.execPath;
const commands: Record<string, string[]> = {
  "bun alone": [bun, "-e", ""],
  "bun + NVML only": [bun, join(root, "bench", "start-floor-nvml.ts")],
  "C + NVML": [cBin, "exit"],
  "gpumem-tui --json --once": [bun, join(root, "dist", "cli.js"), "--json", "--once"],
  "nvidia-smi": ["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"],
};

function wallMs(cmd: string[]): number {
  const t0 = performance.now();
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  const t = performance.now() - t0;
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed (${p.exitCode}): ${p.stderr}`);
  return t;
}

const holder = Bun.spawn(["python3", "-c", "import torch,time; x=torch.empty(3*2**30, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(300)"], { stdout: "pipe" });
await holder.stdout.getReader().read();
const runs: Record<string, number[]> = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
for (const cmd of Object.values(commands)) wallMs(cmd); // the page cache, and NVML's kept constants
for (let i = 0; i < REPS; i++) for (const [k, cmd] of Object.entries(commands)) runs[k]!.push(wallMs(cmd));
holder.kill();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const stats = Object.fromEntries(Object.entries(runs).map(([k, xs]) => [k, { median_ms: +median(xs).toFixed(1), min_ms: +Math.min(...xs).toFixed(1), max_ms: +Math.max(...xs).toFixed(1), runs_ms: xs.map((x) => +x.toFixed(1)) }]));
const m = (k: string) => stats[k]!.median_ms;
const smi = Bun.spawnSync(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], { stdout: "pipe" }).stdout.toString().trim().split("\n")[0];
const result = { date: new Date().toISOString(), gpu: smi, reps: REPS, ...stats };
writeFileSync(join(OUT, "start-floor.json"), `${JSON.stringify(result, null, 1)}\n`);
const row = (k: string) => `| ${k} | ${m(k)} ms | ${stats[k]!.min_ms}–${stats[k]!.max_ms} ms |`;
const md = `# \`--json --once\` against its floors

Command: \`bun bench/start-floor.ts OUT ${REPS}\` on ${smi}, ${result.date}; a process held 3 GiB on the GPU.
Each a fresh process, spawn to exit, ${REPS} interleaved rounds after one warm-up run of each.

| what | median | range |
| --- | --- | --- |
${Object.keys(commands).map(row).join("\n")}

- NVML through Bun costs ${(m("bun + NVML only") - m("C + NVML")).toFixed(1)} ms more than through C; Bun alone starts and ends in ${m("bun alone")} ms.
- The monitor's one-shot costs ${(m("gpumem-tui --json --once") - m("bun + NVML only")).toFixed(1)} ms more than the least Bun program with the same NVML numbers.
- nvidia-smi / the monitor: ${(m("nvidia-smi") / m("gpumem-tui --json --once")).toFixed(2)}×; nvidia-smi / the least Bun program: ${(m("nvidia-smi") / m("bun + NVML only")).toFixed(2)}×.
`;
writeFileSync(join(OUT, "start-floor.md"), md);
console.log(md);
