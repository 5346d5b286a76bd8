// Where `gpumem-tui --json --once` stands against its floors, in one run: Bun starting and ending
// with nothing to do (an empty -e, and an empty module beside the bundle: running any file costs
// Bun its module loader's start), a C program that starts NVML and reads memory and utilization
// (bench/nvml_exit.c), libgpumem's own sample of every device from C (bench/nvml_once.c: the
// one-shot's NVML calls without Bun), the monitor's one-shot, and nvidia-smi with the same fields. Each a fresh process, spawn to exit, interleaved,
// with a process holding 3 GiB on the GPU (as bench/start-compare.ts runs them). EARLIER_TREE: an
// earlier commit's checkout (its bundle built here as this tree's is, its own libgpumem beside it),
// its one-shot interleaved with the rest: the before and after of one run.
//   bun bench/start-floor.ts OUT_DIR [REPS] [EARLIER_TREE]
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SMI_FIELDS } from "./smi-fields";
import { timeStarts } from "./start-runs";

const [outArg, repsArg, earlierArg] = process.argv.slice(2);
if (!outArg) {
  process.stderr.write("usage: bun bench/start-floor.ts OUT_DIR [REPS] [EARLIER_TREE]\n");
  process.exit(2);
}
const OUT = resolve(outArg);
const REPS = Number(repsArg ?? 30);
const root = resolve(import.meta.dir, "..");
mkdirSync(OUT, { recursive: true });
const earlier = earlierArg ? resolve(earlierArg) : null;
for (const tree of [root, ...(earlier ? [earlier] : [])]) {
  const build = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: tree, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`bun run build:bundle in ${tree} failed: ${build.stderr}`);
}
// The C programs are tools, not results: built outside OUT_DIR.
const tools = mkdtempSync(join(tmpdir(), "start-floor-"));
function cc(args: string[]): void {
  const p = Bun.spawnSync(["cc", "-O2", ...args], { cwd: root, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`cc ${args.join(" ")} failed: ${p.stderr}`);
}
const cBin = join(tools, "nvml_exit");
cc(["bench/nvml_exit.c", "-o", cBin, "-ldl"]);
const onceBin = join(tools, "nvml_once");
cc(["-Icuda", "bench/nvml_once.c", "-o", onceBin, "-Lcuda/build", "-lgpumem", `-Wl,-rpath,${join(root, "cuda", "build")}`]);
const bun = process.execPath;
const empty = join(root, "dist", "start-floor-empty.js"); // beside cli.js: the same directories to resolve
writeFileSync(empty, "");
const commands: Record<string, string[]> = {
  "bun alone": [bun, "-e", ""],
  "bun, an empty module": [bun, empty],
  "C: NVML, memory and utilization": [cBin, "exit"],
  "C: libgpumem's sample (the one-shot's calls)": [onceBin],
  "gpumem-tui --json --once": [bun, join(root, "dist", "cli.js"), "--json", "--once"],
  ...(earlier ? { "the earlier tree's --json --once": [bun, join(earlier, "dist", "cli.js"), "--json", "--once"] } : {}),
  "nvidia-smi": ["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"],
};

const stats = await timeStarts(commands, REPS);
const m = (k: string) => stats[k]!.median_ms;
const ONCE = "gpumem-tui --json --once";
const ONCE_C = "C: libgpumem's sample (the one-shot's calls)";
const smi = Bun.spawnSync(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], { stdout: "pipe" }).stdout.toString().trim().split("\n")[0];
const EARLIER = "the earlier tree's --json --once";
const result = { date: new Date().toISOString(), gpu: smi, reps: REPS, earlier_tree: earlier, ...stats, nvidia_smi_over_now: +(m("nvidia-smi") / m(ONCE)).toFixed(2), ...(earlier ? { earlier_over_now: +(m(EARLIER) / m(ONCE)).toFixed(2) } : {}) };
writeFileSync(join(OUT, "start-floor.json"), `${JSON.stringify(result, null, 1)}\n`);
// The middle half beside the range: the one-shot's runs have come in two groups (on the H200 about
// 31 and 41 ms), which a median alone hides.
const quartile = (k: string, f: number) => [...stats[k]!.runs_ms].sort((a, b) => a - b)[Math.floor((stats[k]!.runs_ms.length - 1) * f)]!;
const row = (k: string) => `| ${k} | ${m(k)} ms | ${quartile(k, 0.25)}–${quartile(k, 0.75)} ms | ${stats[k]!.min_ms}–${stats[k]!.max_ms} ms |`;
const md = `# \`--json --once\` against its floors

Command: \`bun bench/start-floor.ts OUT ${REPS}${earlierArg ? ` ${earlierArg}` : ""}\` on ${smi}, ${result.date}; a process held 3 GiB on the GPU.
Each a fresh process, spawn to exit, ${REPS} interleaved rounds after one warm-up run of each.

| what | median | middle half | range |
| --- | --- | --- | --- |
${Object.keys(commands).map(row).join("\n")}

- Bun alone starts and ends in ${m("bun alone")} ms; with an empty module, ${m("bun, an empty module")} ms: the least a Bun program pays before its first line runs, and so before NVML can start. The one-shot's NVML calls from C take ${m(ONCE_C)} ms; the monitor's one-shot ${m(ONCE)} ms, ${(m(ONCE) - m(ONCE_C)).toFixed(1)} ms more.
- The floor of a Bun one-shot, the empty module and the same calls from C (less a bare Bun start, as both count a process starting), is about ${(m("bun, an empty module") + m(ONCE_C) - m("bun alone")).toFixed(1)} ms.
- nvidia-smi / the monitor: **${(m("nvidia-smi") / m(ONCE)).toFixed(2)}×**; nvidia-smi / the same calls from C: ${(m("nvidia-smi") / m(ONCE_C)).toFixed(2)}×.${earlier ? `\n- The earlier tree (${earlierArg}) / this one: **${(m(EARLIER) / m(ONCE)).toFixed(2)}×**; nvidia-smi / the earlier tree: ${(m("nvidia-smi") / m(EARLIER)).toFixed(2)}×.` : ""}
`;
writeFileSync(join(OUT, "start-floor.md"), md);
console.log(md);
