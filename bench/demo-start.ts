#!/usr/bin/env bun
// `gpumem-tui --demo` starting in a real terminal (tmux, 200×60), a tree's against another's in the
// same run: the wall and the CPU until its first frame is on the screen (the Overview of the
// recorded GPU), and its CPU over its first SECONDS (the replay playing meanwhile). What a user
// waits for at `--demo`, and what every terminal test that starts the demo pays.
//   bun bench/demo-start.ts OUT_DIR EARLIER_TREE [ROUNDS] [SECONDS]
// EARLIER_TREE: a checkout of the tree before (its node_modules may be a link to this one's).
// Rounds alternate the trees, so the machine's load falls on both alike.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cpuSeconds } from "../test/support/cpu";

const [out, earlier, roundsArg, secondsArg] = process.argv.slice(2);
if (!out || !earlier) {
  console.error("usage: bun bench/demo-start.ts OUT_DIR EARLIER_TREE [ROUNDS] [SECONDS]");
  process.exit(2);
}
const rounds = Number(roundsArg ?? 8);
const seconds = Number(secondsArg ?? 3);
const trees = { before: resolve(earlier), after: resolve(import.meta.dir, "..") };
// A server of its own for each start: one just killed may still be on its way out.
let socket = "";
let starts = 0;
const tmux = (...a: string[]) => Bun.spawnSync(["tmux", "-L", socket, ...a], { stdout: "pipe", stderr: "pipe" });

async function one(tree: string): Promise<{ first_frame_ms: number; first_frame_cpu_s: number; cpu_s: number }> {
  socket = `gpumem-demo-start-${process.pid}-${starts++}`;
  const t0 = performance.now();
  // exec: the pane's process is the monitor itself, whose /proc/PID/stat is read.
  tmux("new-session", "-d", "-x", "200", "-y", "60", `exec bun ${join(tree, "src/cli.ts")} --demo`);
  const pid = Number(tmux("display-message", "-p", "#{pane_pid}").stdout.toString().trim());
  let first = { ms: Number.NaN, cpu: Number.NaN };
  while (performance.now() - t0 < 20_000) {
    if (tmux("capture-pane", "-p").stdout.toString().includes("[recorded]")) {
      first = { ms: performance.now() - t0, cpu: cpuSeconds(pid) };
      break;
    }
    await Bun.sleep(5);
  }
  await Bun.sleep(Math.max(0, seconds * 1000 - (performance.now() - t0)));
  const cpu = cpuSeconds(pid);
  if (!pid || Number.isNaN(first.ms)) throw new Error(`${tree}: no first frame within 20 s: ${tmux("capture-pane", "-p").stdout}`);
  tmux("kill-server");
  return { first_frame_ms: Number(first.ms.toFixed(0)), first_frame_cpu_s: first.cpu, cpu_s: cpu };
}

type Start = { first_frame_ms: number; first_frame_cpu_s: number; cpu_s: number };
const runs: Record<"before" | "after", Start[]> = { before: [], after: [] };
await one(trees.after); // warms the file cache and Bun's transpiler cache for both alike
await one(trees.before);
for (let r = 0; r < rounds; r++) for (const k of r % 2 ? (["after", "before"] as const) : (["before", "after"] as const)) runs[k].push(await one(trees[k]));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sum = (k: "before" | "after") => ({
  first_frame_ms: median(runs[k].map((x) => x.first_frame_ms)),
  first_frame_cpu_s: median(runs[k].map((x) => x.first_frame_cpu_s)),
  [`cpu_s_first_${seconds}_s`]: median(runs[k].map((x) => x.cpu_s)),
});
const result = { trees, rounds, seconds, load_at_start: readFileSync("/proc/loadavg", "utf8").trim(), median: { before: sum("before"), after: sum("after") }, runs };
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "demo-start.json"), `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result.median));
