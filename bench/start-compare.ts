// `gpumem-tui --json --once` of this tree and of an earlier one, against nvidia-smi with the same
// fields, in one run: each a fresh process timed from spawn to exit, interleaved, with a process
// holding 3 GiB on the GPU (as bench/nvml.ts runs it).
//   bun bench/start-compare.ts OUT_DIR EARLIER_TREE [REPS]
// EARLIER_TREE: a checkout of the earlier commit with node_modules beside it (its bundle is built
// here, as this tree's is).
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { SMI_FIELDS } from "./smi-fields";
import { timeStarts } from "./start-runs";

const [outArg, earlierArg, repsArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: bun bench/start-compare.ts OUT_DIR EARLIER_TREE [REPS]\n");
  process.exit(2);
}
const OUT = resolve(outArg);
const REPS = Number(repsArg ?? 30);
const trees = { now: resolve(import.meta.dir, ".."), earlier: resolve(earlierArg) };
mkdirSync(OUT, { recursive: true });
for (const root of Object.values(trees)) {
  const b = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`bun run build:bundle in ${root} failed: ${b.stderr}`);
}
const commands: Record<string, string[]> = {
  now: ["bun", join(trees.now, "dist", "cli.js"), "--json", "--once"],
  earlier: ["bun", join(trees.earlier, "dist", "cli.js"), "--json", "--once"],
  "nvidia-smi": ["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"],
};

const stats = await timeStarts(commands, REPS);
// The document of this tree is whole: one JSON object with the device.
const doc = JSON.parse(Bun.spawnSync(commands.now!, { stdout: "pipe" }).stdout.toString());
const ratio = (a: string, b: string) => +(stats[b]!.median_ms / stats[a]!.median_ms).toFixed(2);
const result = {
  date: new Date().toISOString(),
  gpu: doc.devices?.[0]?.name ?? null,
  driver: doc.driver_version ?? null,
  reps: REPS,
  ...stats,
  nvidia_smi_over_now: ratio("now", "nvidia-smi"),
  nvidia_smi_over_earlier: ratio("earlier", "nvidia-smi"),
  earlier_over_now: ratio("now", "earlier"),
};
writeFileSync(join(OUT, "start-compare.json"), `${JSON.stringify(result, null, 1)}\n`);
const row = (k: string) => `| ${k} | ${stats[k]!.median_ms} ms | ${stats[k]!.min_ms}–${stats[k]!.max_ms} ms |`;
const md = `# \`--json --once\`: this tree, an earlier one, nvidia-smi

Command: \`bun bench/start-compare.ts OUT ${earlierArg} ${REPS}\` on ${result.gpu} (driver ${result.driver}), ${result.date}; a process held 3 GiB on the GPU.
Each a fresh process, spawn to exit, ${REPS} interleaved rounds after one warm-up run of each.

| what | median | range |
| --- | --- | --- |
${row("now")}
${row("earlier")}
${row("nvidia-smi")}

nvidia-smi / this tree: **${result.nvidia_smi_over_now}×**; nvidia-smi / the earlier tree: ${result.nvidia_smi_over_earlier}×; the earlier tree / this one: ${result.earlier_over_now}×.
`;
writeFileSync(join(OUT, "start-compare.md"), md);
console.log(md);
