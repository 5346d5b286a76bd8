#!/usr/bin/env bun
// The screens of two trees following the same simulated busy rank over the same seconds (one
// writer replaying test/fixtures/hf-gpt2.ring at RATE records a second on the cores past the first,
// bench/support/busy-agents.ts; each monitor the tree's bundle, dist/cli.js, on core 0, in a tmux
// pane of its own at 200×60 on one screen: bench/monitor-cost.ts), two monitors of each tree, so a
// tree's two figures show the spread. Writes OUT_DIR/screens-ab.json and prints a line a monitor.
//   bun bench/screens-ab.ts OUT_DIR EARLIER_TREE [SECONDS] [WARM] [KEYS]   (KEYS: "123": Overview, Process, Tensors)
// Both trees' bundles are built by the caller (bun run build:bundle in each).
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { agentDir, startWriters } from "./support/busy-agents";
import { commitOf } from "./support/tree-rounds";
import { monitorCost } from "./monitor-cost";

const [outArg, earlierArg, secsArg, warmArg, keysArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: bun bench/screens-ab.ts OUT_DIR EARLIER_TREE [SECONDS] [WARM] [KEYS]\n");
  process.exit(2);
}
const SECONDS = Number(secsArg ?? 40);
const WARM = Number(warmArg ?? 20);
const RATE = Number(process.env.RATE ?? 165_000);
const trees = { now: resolve(import.meta.dir, ".."), before: resolve(earlierArg) };
const cores = navigator.hardwareConcurrency;
const pin = cores > 1 && Bun.which("taskset") ? "taskset -c 0 " : "";
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
for (const key of keysArg ?? "123") {
  const dir = agentDir();
  const stop = startWriters(dir, 1, join(import.meta.dir, "..", "test", "fixtures", "hf-gpt2.ring"), RATE, SECONDS + WARM + 20, cores > 1 ? `1-${cores - 1}` : null);
  const specs = ["a", "b"].flatMap((k) => Object.entries(trees).map(([label, tree]) => `${label}-${k}@${key}=env GPUMEM_TUI_DIR=${dir} ${pin}${process.execPath} ${tree}/dist/cli.js --interval 1000`));
  await monitorCost(specs, SECONDS, WARM, join(out, `screens-ab-${key}.json`));
  stop();
}
console.log(`now ${commitOf(trees.now)}, before ${commitOf(trees.before)}; ${RATE} records/s; ${WARM} s warm-up, ${SECONDS} s measured`);
