#!/usr/bin/env bun
// The screens as a user leaves them open, two trees in one run: `gpumem-tui` under tmux (200×60, a
// terminal's colours), nothing typed, its share of one core from /proc over SECONDS, each tree in
// turn for ROUNDS rounds. Modes: `idle`, the Overview of this machine with no agent (on a machine
// without a GPU, its "No GPU here" frame: the ticks' sampling and the frame's comparison alone);
// `demo`, the Overview of the H100 the demo was recorded on, its charts and figures moving as the
// recorded training replays (a frame drawn each second, as on a GPU host following a training).
//   bun bench/tui-idle.ts OUT_DIR EARLIER_TREE [MODES=idle,demo] [ROUNDS=2] [SECONDS=20]
// EARLIER_TREE: a checkout with its own node_modules (or a link to this one's).
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { agentDir } from "./support/busy-agents";
import { monitorPane } from "./support/monitor-pane";
import { procUsage } from "./support/proc-usage";

const [outArg, earlierArg, modesArg, roundsArg, secondsArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: bun bench/tui-idle.ts OUT_DIR EARLIER_TREE [MODES=idle,demo] [ROUNDS=2] [SECONDS=20]\n");
  process.exit(2);
}
const MODES = (modesArg ?? "idle,demo").split(",");
const ROUNDS = Number(roundsArg ?? 2);
const SECONDS = Number(secondsArg ?? 20);
const WARM = Number(process.env.WARM ?? 5);
const trees = { now: resolve(import.meta.dir, ".."), before: resolve(earlierArg) };
const pin = navigator.hardwareConcurrency > 1 && Bun.which("taskset") ? "taskset -c 0 " : "";

async function one(tree: string, mode: string) {
  const args = mode === "demo" ? "--demo" : "";
  const m = monitorPane(`env GPUMEM_TUI_DIR=${agentDir()} ${pin}${process.execPath} ${join(tree, "src/cli.ts")} --interval 1000 ${args}`, 200, 60);
  await Bun.sleep(WARM * 1000);
  const u = await procUsage(m.pid, SECONDS);
  await m.quit();
  return { cpu_percent: +u.cpuPercent.toFixed(2), max_rss_mb: +(u.maxRssBytes / 2 ** 20).toFixed(1), threads: u.threads };
}

const runs: Record<string, Record<string, Awaited<ReturnType<typeof one>>[]>> = {};
for (let r = 0; r < ROUNDS; r++)
  for (const mode of MODES)
    for (const [label, tree] of r % 2 ? Object.entries(trees).reverse() : Object.entries(trees)) {
      const x = await one(tree, mode);
      ((runs[mode] ??= {})[label] ??= []).push(x);
      console.error(`${mode} ${label}: ${x.cpu_percent}% of a core, ${x.max_rss_mb} MiB`);
    }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const commit = (dir: string) => Bun.spawnSync(["git", "-C", dir, "log", "-1", "--format=%h"]).stdout.toString().trim() || "(exported tree)";
const summary = Object.fromEntries(
  MODES.map((mode) => {
    const [b, n] = [median(runs[mode]!.before!.map((x) => x.cpu_percent)), median(runs[mode]!.now!.map((x) => x.cpu_percent))];
    return [mode, { before: b, now: n, before_over_now: +(b / n).toFixed(2) }];
  }),
);
const result = { date: new Date().toISOString(), command: `WARM=${WARM} bun bench/tui-idle.ts OUT ${earlierArg} ${MODES.join(",")} ${ROUNDS} ${SECONDS}`, machine: `${navigator.hardwareConcurrency} cores, bun ${Bun.version}`, now: commit(trees.now), before: commit(trees.before), summary, runs };
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "tui-idle.json"), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify({ summary, now: result.now, before: result.before }));
