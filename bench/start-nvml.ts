// NVML's part of `gpumem-tui --json --once`, which the one-shot waits for (its warm-up thread,
// cuda/nvml_warm_up.c): each call's time in a fresh process (bench/nvml_start.c calls), and the slow
// part's calls one after another against the utilization queries on a second thread (serial,
// overlap: whether the driver answers two of a device's calls at once, which would take the
// slowest first call off the one-shot's path). With a process holding 3 GiB on the GPU.
//   bun bench/start-nvml.ts OUT_DIR [REPS]     (a GPU machine; REPS fresh processes each, default 15)
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { withProcessOnGpu } from "./start-runs";

const [outArg, repsArg] = process.argv.slice(2);
if (!outArg) {
  process.stderr.write("usage: bun bench/start-nvml.ts OUT_DIR [REPS]\n");
  process.exit(2);
}
const OUT = resolve(outArg);
const REPS = Number(repsArg ?? 15);
mkdirSync(OUT, { recursive: true });
const root = resolve(import.meta.dir, "..");
const bin = join(mkdtempSync(join(tmpdir(), "start-nvml-")), "nvml_start"); // a tool, not a result
const cc = Bun.spawnSync(["cc", "-O2", "-Icuda", "bench/nvml_start.c", "-o", bin, "-ldl", "-lpthread"], { cwd: root, stdout: "pipe", stderr: "pipe" });
if (cc.exitCode !== 0) throw new Error(`cc bench/nvml_start.c failed: ${cc.stderr}`);

/** One fresh process: its "name µs [rc]" lines. */
function run(mode: string): { name: string; us: number; rc: number | null }[] {
  const p = Bun.spawnSync([bin, mode], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`nvml_start ${mode} failed (${p.exitCode}): ${p.stderr}`);
  return p.stdout
    .toString()
    .trim()
    .split("\n")
    .map((l) => {
      const m = /^(.+?) ([\d.]+)(?: (-?\d+))?$/.exec(l);
      if (!m) throw new Error(`nvml_start ${mode}: unexpected line "${l}"`);
      return { name: m[1]!, us: Number(m[2]), rc: m[3] === undefined ? null : Number(m[3]) };
    });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const result = await withProcessOnGpu(() => {
  run("calls"); // the page cache; NVML's own first start after a quiet spell
  const calls = new Map<string, { us: number[]; rc: number | null }>();
  const slow: Record<"serial" | "overlap", number[]> = { serial: [], overlap: [] };
  for (let i = 0; i < REPS; i++) {
    for (const c of run("calls")) calls.set(c.name, { us: [...(calls.get(c.name)?.us ?? []), c.us], rc: c.rc });
    for (const mode of ["serial", "overlap"] as const) slow[mode].push(run(mode).find((l) => l.name === "slow part")!.us);
  }
  return {
    calls: [...calls].map(([name, c]) => ({ name, median_us: +median(c.us).toFixed(1), min_us: +Math.min(...c.us).toFixed(1), max_us: +Math.max(...c.us).toFixed(1), rc: c.rc })),
    slow_part: Object.fromEntries(Object.entries(slow).map(([k, xs]) => [k, { median_us: +median(xs).toFixed(1), min_us: +Math.min(...xs).toFixed(1), max_us: +Math.max(...xs).toFixed(1), runs_us: xs.map((x) => +x.toFixed(1)) }])) as Record<"serial" | "overlap", { median_us: number; min_us: number; max_us: number; runs_us: number[] }>,
  };
});
const gpu = Bun.spawnSync(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], { stdout: "pipe" }).stdout.toString().trim().split("\n")[0];
const date = new Date().toISOString();
writeFileSync(join(OUT, "start-nvml.json"), `${JSON.stringify({ date, gpu, reps: REPS, ...result }, null, 1)}\n`);
const total = result.calls.filter((c) => !/kept after|skipped after/.test(c.name)).reduce((n, c) => n + c.median_us, 0);
const ms = (us: number) => (us / 1000).toFixed(2);
const md = `# NVML's part of \`--json --once\`, call by call

Command: \`bun bench/start-nvml.ts OUT ${REPS}\` on ${gpu}, ${date}; a process held 3 GiB on the GPU.
Each call's time in a fresh process (bench/nvml_start.c calls: the first call of each in the process), medians of ${REPS}.

| call | median | range | rc |
| --- | --- | --- | --- |
${result.calls.map((c) => `| ${c.name} | ${ms(c.median_us)} ms | ${ms(c.min_us)}–${ms(c.max_us)} ms | ${c.rc} |`).join("\n")}

- The one-shot's calls (the maximum clocks kept, and the fan where it is not there) add up to ${ms(total)} ms of medians.
- The slow part (utilization, the process utilization, temperature, power limit, clocks, state, power now), ${REPS} fresh processes of each, interleaved: one after another ${ms(result.slow_part.serial.median_us)} ms (${ms(result.slow_part.serial.min_us)}–${ms(result.slow_part.serial.max_us)}); the utilization queries on a second thread ${ms(result.slow_part.overlap.median_us)} ms (${ms(result.slow_part.overlap.min_us)}–${ms(result.slow_part.overlap.max_us)}): **${(result.slow_part.serial.median_us / result.slow_part.overlap.median_us).toFixed(2)}×**.
`;
writeFileSync(join(OUT, "start-nvml.md"), md);
console.log(md);
