// The monitor's own cost in a real terminal: time to the first frame, then CPU and memory over 20 s
// at a 1-second interval: watching the machine, and running the demo (a recording replayed through
// the model, redrawn at each replayed state: an upper bound).
//   bun bench/tui-resources.ts [OUT_DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { monitorPane } from "./support/monitor-pane";
import { procUsage } from "./support/proc-usage";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const cli = join(import.meta.dir, "..", "src", "cli.ts");
const SECONDS = 20;

async function measure(args: string, env = "") {
  const t0 = performance.now();
  const m = monitorPane(`env ${env} bun ${cli} ${args}`, 200, 60);
  const firstFrameMs = await m.firstFrame(t0);
  await Bun.sleep(2000); // past start-up
  const { cpuPercent: cpuPct, maxRssBytes: maxRss } = await procUsage(m.pid, SECONDS);
  await m.quit();

  return { args, env, first_frame_ms: Math.round(firstFrameMs), cpu_percent_of_a_core: +cpuPct.toFixed(2), max_rss_mb: +(maxRss / 2 ** 20).toFixed(1) };
}
// NODE_ENV=development: React's development build, what the monitor ran before it chose the
// production build itself (src/cli.ts loadScreens); the same code otherwise, side by side.
const DEV = "NODE_ENV=development";
const runs = [
  await measure("--interval 1000"),
  await measure("--interval 1000", DEV),
  await measure("--demo --interval 1000"),
  await measure("--demo --interval 1000", DEV),
];
const r = { date: new Date().toISOString(), seconds: SECONDS, runs };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "tui-resources.json"), `${JSON.stringify(r, null, 2)}\n`);
const md = `# The monitor's own cost

Command: \`bun bench/tui-resources.ts\` (${r.date}, this repository's 2-core machine, no GPU). The monitor in
tmux at 200×60, two ways: watching this machine (no GPU, no agents: the Overview sampling every second),
and \`--demo\` (a recorded H100 training run replayed through the model at 0.5×, looping, the screen
redrawn at each replayed state: an upper bound); each also with \`${DEV}\` (React's development
build, which the monitor ran before it chose the production build). Measured from /proc over ${SECONDS} s after a 2 s start-up. First frame: from starting the
process to the header on the pane (tmux polled every 5 ms; includes Bun's start-up).

| run | first frame (target < 300 ms) | CPU, % of a core (target < 2 %) | max RSS (target < 150 MB) |
| --- | --- | --- | --- |
${runs.map((x) => `| \`${x.env ? `${x.env} ` : ""}${x.args}\` | ${x.first_frame_ms} ms | ${x.cpu_percent_of_a_core} % | ${x.max_rss_mb} MB |`).join("\n")}

nvtop and nvidia-smi do not run on this machine (no GPU); the side-by-side with them is left for the device.
`;
writeFileSync(join(outDir, "tui-resources.md"), md);
console.log(md);
