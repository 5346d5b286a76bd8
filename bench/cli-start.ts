// `gpumem-tui --json --once` start to exit, this checkout's bundle (dist/cli.js, what the package
// runs; built first) and sources against other checkouts (an earlier commit) and an empty Bun
// script, interleaved in one run; nvidia-smi beside them, for the same fields, where it exists.
//   git worktree add /tmp/before <commit> && (cd /tmp/before && bun install)
//   bun bench/cli-start.ts [--out DIR] [--reps N] /tmp/before ...   (each earlier checkout's bundle is built there)
// On a machine without a GPU this times everything but NVML: Bun's start, module loading, the
// native library, /proc and the agents' directory, JSON, exit.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  allowPositionals: true,
  options: { out: { type: "string" }, reps: { type: "string", default: "40" } },
});
const reps = Number(values.reps);
const here = resolve(import.meta.dir, "..");
const empty = join(mkdtempSync(join(tmpdir(), "cli-start-")), "empty.ts");
writeFileSync(empty, "export {};\n");

const SMI_FIELDS =
  "index,name,uuid,pci.bus_id,memory.total,memory.used,memory.free,memory.reserved,utilization.gpu,utilization.memory," +
  "utilization.encoder,utilization.decoder,temperature.gpu,power.draw,power.limit,fan.speed,clocks.sm,clocks.max.sm," +
  "clocks.mem,clocks.max.mem,clocks.gr,pstate";
const bundled = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: here, stdout: "pipe", stderr: "pipe" });
if (bundled.exitCode !== 0) throw new Error(`bun run build:bundle failed: ${bundled.stderr}`);
const commitOf = (dir: string) => Bun.spawnSync(["git", "-C", dir, "log", "-1", "--format=%h"]).stdout.toString().trim();
const dirty = Bun.spawnSync(["git", "-C", here, "status", "--porcelain"]).stdout.length ? " + changes" : "";
const subjects: { name: string; cmd: string[] }[] = [
  { name: `this checkout's bundle (dist/cli.js, the package's bin), ${commitOf(here)}${dirty}`, cmd: [process.execPath, join(here, "dist/cli.js"), "--json", "--once"] },
  { name: `this checkout's sources, ${commitOf(here)}${dirty}`, cmd: [process.execPath, join(here, "src/cli.ts"), "--json", "--once"] },
  // An earlier checkout's bundle, built there as here (its own node_modules), and its sources.
  ...positionals.flatMap((dir) => {
    const b = Bun.spawnSync(["bun", "run", "build:bundle"], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    if (b.exitCode !== 0) throw new Error(`bun run build:bundle in ${dir} failed: ${b.stderr}`);
    return [
      { name: `commit ${commitOf(dir)}'s bundle`, cmd: [process.execPath, join(resolve(dir), "dist/cli.js"), "--json", "--once"] },
      { name: `commit ${commitOf(dir)}'s sources`, cmd: [process.execPath, join(resolve(dir), "src/cli.ts"), "--json", "--once"] },
    ];
  }),
  { name: "an empty Bun script", cmd: [process.execPath, empty] },
  { name: "`bun -e 0`", cmd: [process.execPath, "-e", "0"] },
];
if (Bun.which("nvidia-smi")) subjects.push({ name: `nvidia-smi --query-gpu=<the same ${SMI_FIELDS.split(",").length} fields> --format=csv`, cmd: ["nvidia-smi", `--query-gpu=${SMI_FIELDS}`, "--format=csv"] });

function wallMs(cmd: string[]): number {
  const t0 = performance.now();
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  const t = performance.now() - t0;
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} exited ${p.exitCode}: ${p.stderr}`);
  return t;
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const times = subjects.map(() => [] as number[]);
subjects.forEach((s) => wallMs(s.cmd)); // warm the page cache for each
for (let i = 0; i < reps; i++) subjects.forEach((s, j) => times[j]!.push(wallMs(s.cmd)));

const base = median(times[0]!);
const quartile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * q)]!;
const rows = subjects.map((s, j) => ({
  name: s.name,
  median_ms: +median(times[j]!).toFixed(2),
  q1_ms: +quartile(times[j]!, 0.25).toFixed(2),
  q3_ms: +quartile(times[j]!, 0.75).toFixed(2),
  ratio_to_this: +(median(times[j]!) / base).toFixed(2),
}));
const md = [
  `# \`gpumem-tui --json --once\`, start to exit`,
  ``,
  `Command: \`bun bench/cli-start.ts ${process.argv.slice(2).join(" ")}\`, ${new Date().toISOString()}, Bun ${Bun.version}, ` +
    `${reps} interleaved repetitions after one warm-up of each.`,
  ``,
  `| what | median | quartiles | × the bundle |`,
  `| --- | --- | --- | --- |`,
  ...rows.map((r) => `| ${r.name} | ${r.median_ms} ms | ${r.q1_ms}–${r.q3_ms} ms | ${r.ratio_to_this}× |`),
  ``,
].join("\n");
process.stdout.write(md);
if (values.out) {
  mkdirSync(values.out, { recursive: true });
  writeFileSync(join(values.out, "cli-start.md"), md);
  writeFileSync(join(values.out, "cli-start.json"), `${JSON.stringify({ date: new Date().toISOString(), bun: Bun.version, reps, rows }, null, 2)}\n`);
}
