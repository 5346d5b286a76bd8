#!/usr/bin/env bun
// The Tensors screen (or SCREEN=process, …) of a training as it moves, drawn as the monitor draws it
// (the App in Ink, 200×60, in colour as in a terminal, incremental rendering, React's production
// build), a tree's against another's in the same run: the GPT-2 recording (test/fixtures/
// hf-gpt2.ring) replayed a state at a time, each state one frame, so its rows (ages, steps, blocks)
// change every frame as a busy follower's do.
//   NODE_ENV=production [SCREEN=tensors] bun bench/tensors-redraw.tsx OUT_DIR EARLIER_TREE [ROUNDS] [FRAMES]
// EARLIER_TREE: a checkout with its own node_modules (its own Ink and its patch).
// One round: each tree in a fresh process, FRAMES frames after 10 to warm up; the CPU of each frame
// (process.cpuUsage over the frames: the replay's ingest between them included, the same in both).
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { treeApp } from "./support/tree-app";
import { commitOf, median, treeRounds } from "./support/tree-rounds";

async function one(tree: string, frames: number): Promise<{ cpu_ms_a_frame: number; bytes_a_frame: number }> {
  const { render, React, App, Controller } = await treeApp(tree);
  const { openRingRecording } = await import(join(tree, "src/collect/recording"));
  const { createModel } = await import(join(tree, "src/profiler"));
  const { replay } = await import(join(tree, "src/profiler/replay"));
  const rec = openRingRecording(join(tree, "test/fixtures/hf-gpt2.ring"));
  const model = createModel().keepTrace();
  const states = replay(rec.source, { ranges: rec.ranges, model, state_every_us: 3_000 });
  const ctl = new Controller(null, 1000);
  ctl.replay = { pid: 0, model, source: "replay", socket: null, title: "ring", ended: false };
  let bytes = 0;
  const stdout = Object.assign(new Writable({ write: (c, _e, cb) => ((bytes += c.length), cb()) }), { columns: 200, rows: 60, isTTY: true });
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin, ref: () => stdin, unref: () => stdin, read: () => null });
  render(React.createElement(App, { ctl, ascii: false, initialScreen: process.env.SCREEN ?? "tensors" }), { stdout, stdin, patchConsole: false, interactive: true, exitOnCtrlC: false, maxFps: 20, incrementalRendering: true });
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const step = async () => {
    const s = await states.next();
    if (s.done) throw new Error("the recording ended before the frames did: fewer FRAMES");
    await ctl.tick();
    await Bun.sleep(60); // past Ink's 20 frames a second
  };
  for (let i = 0; i < 10; i++) await step();
  bytes = 0;
  const c0 = cpu();
  for (let i = 0; i < frames; i++) await step();
  return { cpu_ms_a_frame: +((cpu() - c0 - 0) / frames).toFixed(2), bytes_a_frame: Math.round(bytes / frames) };
}

if (process.env.TENSORS_REDRAW_CHILD) {
  const [tree, frames] = process.env.TENSORS_REDRAW_CHILD.split("|") as [string, string];
  console.log(JSON.stringify(await one(tree, Number(frames))));
  process.exit(0);
}

const [outArg, earlierArg, roundsArg, framesArg] = process.argv.slice(2);
if (!outArg || !earlierArg) {
  process.stderr.write("usage: NODE_ENV=production bun bench/tensors-redraw.tsx OUT_DIR EARLIER_TREE [ROUNDS] [FRAMES]\n");
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 3);
const FRAMES = Number(framesArg ?? 40);
const trees = { now: resolve(import.meta.dir, ".."), before: resolve(earlierArg) };
const runs = treeRounds<{ cpu_ms_a_frame: number; bytes_a_frame: number }>(import.meta.path, "TENSORS_REDRAW_CHILD", trees, ROUNDS, FRAMES, { FORCE_COLOR: "1" });
const m = (label: string) => median(runs[label]!.map((x) => x.cpu_ms_a_frame));
const result = { date: new Date().toISOString(), screen: process.env.SCREEN ?? "tensors", command: `NODE_ENV=production SCREEN=${process.env.SCREEN ?? "tensors"} bun bench/tensors-redraw.tsx OUT ${earlierArg} ${ROUNDS} ${FRAMES}`, now: commitOf(trees.now), before: commitOf(trees.before), runs, median_cpu_ms_a_frame: { now: m("now"), before: m("before") }, before_over_now: +(m("before") / m("now")).toFixed(2) };
const out = resolve(outArg);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, `${process.env.SCREEN ?? "tensors"}-redraw.json`), `${JSON.stringify(result, null, 1)}\n`);
console.log(JSON.stringify(result.median_cpu_ms_a_frame), "before/now", result.before_over_now);
