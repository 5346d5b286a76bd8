// The demo on the Process screen, old and new side by side in one run: CPU (% of a core), resident
// memory, and bytes written to the terminal per second on a steady screen (no key pressed, no
// resize) at the default interval, in tmux at 120×40 (the terminal's output counted by
// `tmux pipe-pane`). OLD_TREE is another checkout of the monitor (e.g. the last commit:
// `git archive HEAD | tar -x -C /tmp/old && ln -s $PWD/node_modules /tmp/old/`).
//   bun bench/tui-process-screen.ts OLD_TREE [OUT_DIR]
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { monitorPane } from "./support/monitor-pane";
import { procUsage } from "./support/proc-usage";

const oldTree = process.argv[2];
if (!oldTree) throw new Error("usage: bun bench/tui-process-screen.ts OLD_TREE [OUT_DIR]");
const outDir = process.argv[3] ?? join(import.meta.dir, "results");
const SECONDS = 30;
const ROUNDS = 2; // old, new, old, new: each measured twice, interleaved
const work = mkdtempSync(join(tmpdir(), "gpumem-bench-screen-"));

async function measure(label: string, tree: string) {
  const out = join(work, `${label}.out`);
  writeFileSync(out, "");
  // Started in its tree, as the terminal tests start it (no key here writes a file).
  const m = monitorPane(`bun ${join(resolve(tree), "src", "cli.ts")} --demo`, 120, 40, resolve(tree));
  await m.firstFrame(performance.now());
  m.keys("2");
  await Bun.sleep(3000); // past start-up and the switch to the Process screen
  m.pipe(out);
  const { cpuPercent: cpuPct, maxRssBytes: maxRss, wallS } = await procUsage(m.pid, SECONDS);
  m.pipe();
  const screen = m.pane();
  await m.quit();
  return {
    run: label,
    cpu_percent_of_a_core: +cpuPct.toFixed(2),
    max_rss_mb: +(maxRss / 2 ** 20).toFixed(1),
    terminal_bytes_per_s: Math.round(statSync(out).size / wallS),
    on_process_screen: screen.includes("[2 Process]"),
  };
}

const runs = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    runs.push(await measure(`old-${r + 1}`, oldTree));
    runs.push(await measure(`new-${r + 1}`, join(import.meta.dir, "..")));
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
const cmd = `bun bench/tui-process-screen.ts ${oldTree}`;
const r = { date: new Date().toISOString(), command: cmd, seconds: SECONDS, terminal: "120x40", interval_ms: 1000, runs };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "tui-process-screen.json"), `${JSON.stringify(r, null, 2)}\n`);
const md = `# The demo on the Process screen: old and new

Command: \`${cmd}\` (${r.date}, this repository's 2-core machine, no GPU). \`--demo\` at the default
interval (1000 ms) in tmux at 120×40, \`2\` pressed once it draws, then ${SECONDS} s with no key: CPU from
/proc (utime + stime), the largest resident set seen once a second, and the bytes the monitor wrote
to the terminal (\`tmux pipe-pane\`). Old: the last commit (the Process screen drawn at each replayed
state); new: the store (one state a tick, drawn once a tick). Interleaved, each twice.

| run | CPU, % of a core (target ≤ 5 %) | max RSS (target ≤ 200 MB) | terminal, bytes/s (target ≤ 5 KB/s) |
| --- | --- | --- | --- |
${runs.map((x) => `| ${x.run}${x.on_process_screen ? "" : " (not on the Process screen!)"} | ${x.cpu_percent_of_a_core} % | ${x.max_rss_mb} MB | ${x.terminal_bytes_per_s} |`).join("\n")}
`;
writeFileSync(join(outDir, "tui-process-screen.md"), md);
console.log(md);
