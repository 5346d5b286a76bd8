#!/usr/bin/env bun
// The Overview of a GPU with no process, drawn once a second as the monitor draws it (the App in
// Ink, 200×60, incremental rendering, React's production build), a tree's against another's in the
// same run: the document recorded on an H100 (test/fixtures/h100-training.json) without its process,
// its power draw and PCIe rate stepped every tick as an idle GPU's move (the frame changes each
// second: what the screens cost where a figure on them moves), its history charts full and flat.
// No GPU here: this is the screens' part of an idle monitor on a GPU host, not NVML's.
//   NODE_ENV=production bun bench/overview-redraw.tsx OUT_DIR EARLIER_TREE [ROUNDS] [TICKS]
// EARLIER_TREE: a checkout with its own node_modules (its own Ink and its patch).
// One round: each tree in a fresh process, TICKS ticks a second apart after 3 to warm up; the CPU of
// each tick (process.cpuUsage over the ticks, idle time between included).
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { treeApp } from "./support/tree-app";
import { commitOf, median, treeRounds } from "./support/tree-rounds";

async function one(tree: string, ticks: number): Promise<{ cpu_ms_a_tick: number; bytes_a_tick: number }> {
  const { render, React, App, Controller, recorded } = await treeApp(tree);
  const ctl = new Controller(null, 1000);
  const base = { ...recorded, processes: [] };
  const d0 = base.devices[0];
  const h = { util: Array(600).fill(0), memUsed: Array(600).fill(d0.memory_used_bytes), timesMs: Array.from({ length: 600 }, (_, i) => i * 1000) };
  ctl.history.set(0, h);
  let bytes = 0;
  const stdout = Object.assign(new Writable({ write: (c, _e, cb) => ((bytes += c.length), cb()) }), { columns: 200, rows: 60, isTTY: true });
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin, ref: () => stdin, unref: () => stdin, read: () => null });
  render(React.createElement(App, { ctl, ascii: false }), { stdout, stdin, patchConsole: false, interactive: true, exitOnCtrlC: false, maxFps: 20, incrementalRendering: true });
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const step = async (i: number) => {
    ctl.doc = { ...base, time_unix_ms: i * 1000, devices: [{ ...d0, power_draw_milliwatts: 70_000 + (i % 5) * 1000, pcie_rx_bytes_per_second: 1000 + (i % 7) * 100 }] };
    h.util.push(0), h.util.shift(), h.memUsed.push(d0.memory_used_bytes), h.memUsed.shift(), h.timesMs.push(600_000 + i * 1000), h.timesMs.shift();
    await ctl.tick();
    await Bun.sleep(1000);
  };
  for (let i = 0; i < 3; i++) await step(i);
  bytes = 0;
  const c0 = cpu();
  for (let i = 3; i < 3 + ticks; i++) await step(i);
  return { cpu_ms_a_tick: +((cpu() - c0) / ticks).toFixed(2), bytes_a_tick: Math.round(bytes / ticks) };
}

if (process.env.OVERVIEW_REDRAW_CHILD) {
  const [tree, ticks] = process.env.OVERVIEW_REDRAW_CHILD.split("|") as [string, string];
  console.log(JSON.stringify(await one(tree, Number(ticks))));
  process.exit(0);
}

const [outArg, earlierArg, roundsArg, ticksArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: NODE_ENV=production bun bench/overview-redraw.tsx OUT_DIR EARLIER_TREE [ROUNDS] [TICKS]\n");
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 3);
const TICKS = Number(ticksArg ?? 10);
const trees = { now: resolve(import.meta.dir, ".."), before: resolve(earlierArg) };
const runs = treeRounds<{ cpu_ms_a_tick: number; bytes_a_tick: number }>(import.meta.path, "OVERVIEW_REDRAW_CHILD", trees, ROUNDS, TICKS);
const m = (label: string) => median(runs[label]!.map((x) => x.cpu_ms_a_tick));
const result = { date: new Date().toISOString(), command: `NODE_ENV=production bun bench/overview-redraw.tsx OUT ${earlierArg} ${ROUNDS} ${TICKS}`, now: commitOf(trees.now), before: commitOf(trees.before), runs, median_cpu_ms_a_tick: { now: m("now"), before: m("before") }, before_over_now: +(m("before") / m("now")).toFixed(2) };
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "overview-redraw.json"), `${JSON.stringify(result, null, 1)}\n`);
const md = `# The Overview of a GPU with no process, drawn each second: ${result.before} against ${result.now}

Command: \`${result.command}\` (${result.date}, ${navigator.hardwareConcurrency} cores, bun ${Bun.version}). The recorded H100 document without its process, its power and PCIe figures stepped each tick (the frame changes each second), charts full and flat; ${ROUNDS} rounds of ${TICKS} ticks a second apart, each tree in a fresh process, alternating.

| tree | CPU a tick (median of rounds) | rounds | bytes written a tick |
| --- | --- | --- | --- |
| before (${result.before}) | ${m("before")} ms | ${runs.before!.map((x) => x.cpu_ms_a_tick).join(", ")} | ${runs.before![0]!.bytes_a_tick} |
| now (${result.now}) | ${m("now")} ms | ${runs.now!.map((x) => x.cpu_ms_a_tick).join(", ")} | ${runs.now![0]!.bytes_a_tick} |

before / now: **${result.before_over_now}×** (the same bytes reach the terminal: the frames are the same).
`;
writeFileSync(join(out, "overview-redraw.md"), md);
console.log(md);
