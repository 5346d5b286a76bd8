// NVML sampling, side by side with nvidia-smi, on a GPU machine.
//   bun bench/nvml.ts [OUT_DIR]      (default bench/results)
// 1. CPU cost of one full device sample through bun:ffi (all fields + processes).
// 2. `gpumem-tui --json --once` against `nvidia-smi --query-gpu=<the same fields> --format=csv`,
//    interleaved, medians, ratio: the package's bin (the bundle, dist/cli.js, built first) and the
//    sources (bun src/cli.ts).
// 3. Agreement: our numbers next to nvidia-smi's, taken in the same run, with a process holding
//    memory on the GPU.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Nvml } from "../src/ffi/nvml";
import { SMI_FIELDS } from "./smi-fields";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
mkdirSync(outDir, { recursive: true });
const ROOT = join(import.meta.dir, "..");
const SOURCE = join(ROOT, "src", "cli.ts");
const built = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
if (built.exitCode !== 0) throw new Error(`bun run build:bundle failed: ${built.stderr}`);
const CLI = join(ROOT, "dist", "cli.js");

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function wallMs(cmd: string[], env: Record<string, string | undefined> = process.env): number {
  const t0 = performance.now();
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe", env });
  const t = performance.now() - t0;
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${p.stderr}`);
  return t;
}

const holder = Bun.spawn(
  ["python3", "-c", "import torch,time; x=torch.empty(3*2**30, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(120)"],
  { stdout: "pipe" },
);
await holder.stdout.getReader().read();

// 1. Per-sample CPU cost.
const nvml = Nvml.open();
const sys = nvml.system();
for (let i = 0; i < 50; i++) nvml.sample(0);
const N = 2000;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < N; i++) nvml.sample(i % sys.device_count);
const wallPerSampleUs = ((performance.now() - t0) * 1000) / N;
const cpu = process.cpuUsage(cpu0);
const cpuPerSampleUs = (cpu.user + cpu.system) / N;

// 2. --json --once vs nvidia-smi, interleaved.
const REPS = 20;
const ours: number[] = [];
const cold: number[] = []; // the bundle with no NVML constants kept (cuda/nvml_constants.c): a first run
const coldEnv = () => ({ ...process.env, XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), "gpumem-cold-")) });
const source: number[] = [];
const smi: number[] = [];
wallMs(["bun", CLI, "--json", "--once"]); // warm the page cache for each
wallMs(["bun", SOURCE, "--json", "--once"]);
wallMs(["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"]);
for (let i = 0; i < REPS; i++) {
  ours.push(wallMs(["bun", CLI, "--json", "--once"]));
  smi.push(wallMs(["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"]));
  source.push(wallMs(["bun", SOURCE, "--json", "--once"]));
  cold.push(wallMs(["bun", CLI, "--json", "--once"], coldEnv()));
}

// 3. Agreement in the same moment.
const doc = JSON.parse(Bun.spawnSync(["bun", CLI, "--json", "--once"]).stdout.toString());
const smiGpu = Bun.spawnSync(["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"]).stdout.toString().trim();
const smiApps = Bun.spawnSync(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,process_name,used_memory", "--format=csv"]).stdout.toString().trim();
holder.kill();

const result = {
  date: new Date().toISOString(),
  device: doc.devices[0]?.name,
  driver: sys.driver_version,
  devices: sys.device_count,
  sample_cpu_us: +cpuPerSampleUs.toFixed(1),
  sample_wall_us: +wallPerSampleUs.toFixed(1),
  json_once_median_ms: +median(ours).toFixed(1),
  json_once_source_median_ms: +median(source).toFixed(1),
  json_once_cold_median_ms: +median(cold).toFixed(1),
  nvidia_smi_median_ms: +median(smi).toFixed(1),
  ratio_smi_over_ours: +(median(smi) / median(ours)).toFixed(2),
  reps: REPS,
  json_once_ms: ours.map((x) => +x.toFixed(1)),
  json_once_source_ms: source.map((x) => +x.toFixed(1)),
  json_once_cold_ms: cold.map((x) => +x.toFixed(1)),
  nvidia_smi_ms: smi.map((x) => +x.toFixed(1)),
};
writeFileSync(join(outDir, "nvml.json"), `${JSON.stringify(result, null, 2)}\n`);
const md = `# NVML sampling and \`--json --once\` vs nvidia-smi

Command: \`bun bench/nvml.ts\` on ${result.device} (${result.devices} device, driver ${result.driver}), ${result.date}.
A process held 3 GiB on the GPU during the run.

| what | median |
| --- | --- |
| one full device sample through bun:ffi (all fields + process list), CPU | ${result.sample_cpu_us} µs |
| same, wall clock | ${result.sample_wall_us} µs |
| \`gpumem-tui --json --once\`, the package's bin (bundle, dist/cli.js): whole process, Bun start, NVML init, sample, JSON | ${result.json_once_median_ms} ms |
| same from the sources (\`bun src/cli.ts\`) | ${result.json_once_source_median_ms} ms |
| the bundle with no NVML constants kept (a first run after a boot or a driver change) | ${result.json_once_cold_median_ms} ms |
| \`nvidia-smi --query-gpu=<the same ${SMI_FIELDS.split(",").length} fields> --format=csv\` | ${result.nvidia_smi_median_ms} ms |
| ratio nvidia-smi / gpumem-tui | **${result.ratio_smi_over_ours}×** |

${REPS} interleaved repetitions of each after one warm-up of each. Runs (ms):
gpumem-tui ${result.json_once_ms.join(", ")}; from the sources ${result.json_once_source_ms.join(", ")}; with no constants kept ${result.json_once_cold_ms.join(", ")}; nvidia-smi ${result.nvidia_smi_ms.join(", ")}.

## Agreement, taken in the same run

\`nvidia-smi --query-gpu=${SMI_FIELDS} --format=csv\`:
\`\`\`
${smiGpu}
\`\`\`
\`nvidia-smi --query-compute-apps=pid,gpu_uuid,process_name,used_memory --format=csv\`:
\`\`\`
${smiApps}
\`\`\`
\`gpumem-tui --json --once\`:
\`\`\`json
${JSON.stringify(doc, null, 2)}
\`\`\`
`;
writeFileSync(join(outDir, "nvml.md"), md);
console.log(md.split("## Agreement")[0]);
