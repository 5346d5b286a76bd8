#!/usr/bin/env bun
// Where a monitor's time went, from a Bun sampling profile (`bun --cpu-prof`; MON_PROF in
// test/gpu/ranks.sh, GPUMEM_BENCH_PROF in bench/screens-agents.ts): the samples in each part of the
// monitor (a sample counts for a part when any frame of its stack is in that part's files), per
// WINDOW seconds of the run and over the whole of it, and the functions with the most samples of
// their own. FROM_S and TO_S: besides, the functions in the samples between those seconds of the
// profile (a measured window), by samples of their own and by samples anywhere on their stack.
//   bun bench/support/profile-split.ts PROFILE.cpuprofile [WINDOW_S [FROM_S TO_S]]
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The monitor's parts, by the files their frames come from. */
const PARTS: [string, RegExp][] = [
  ["drawing (React, Ink, Yoga)", /react-reconciler|\/ink\/build|string-width|ansi-tokenize|yoga-layout/],
  ["the models' ingest", /src\/profiler\/model\.ts/],
  ["ring reads", /src\/ffi\/ring\.ts/],
  ["NVML", /src\/ffi\/nvml\.ts/],
  ["the machine's sample (/proc, NVML, agents)", /src\/collect\/machine\.ts/],
];

const path = process.argv[2];
if (!path) throw new Error("usage: bun bench/support/profile-split.ts PROFILE.cpuprofile [WINDOW_S]");
const windowUs = Number(process.argv[3] ?? 5) * 1e6;
const p = JSON.parse(readFileSync(path, "utf8")) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const name = (n: Node) => `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url.replace(/^file:\/\/.*?\/(src|node_modules)\//, "$1/")}:${n.callFrame.lineNumber}`;

const from = process.argv[4] === undefined ? NaN : Number(process.argv[4]) * 1e6;
const to = process.argv[5] === undefined ? NaN : Number(process.argv[5]) * 1e6;
const windows = new Map<number, number[]>(); // window → [samples, ...per part]
const own = new Map<string, number>();
const inWindow = { samples: 0, own: new Map<string, number>(), stacked: new Map<string, number>() };
const whole = new Array<number>(PARTS.length + 1).fill(0);
let t = p.startTime;
for (let i = 0; i < p.samples.length; i++) {
  t += p.timeDeltas[i] ?? 0;
  const w = Math.floor((t - p.startTime) / windowUs);
  const row = windows.get(w) ?? new Array<number>(PARTS.length + 1).fill(0);
  windows.set(w, row);
  const leaf = byId.get(p.samples[i]!)!;
  own.set(name(leaf), (own.get(name(leaf)) ?? 0) + 1);
  const urls: string[] = [];
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) urls.push(byId.get(id)!.callFrame.url);
  if (t - p.startTime >= from && t - p.startTime < to) {
    inWindow.samples++;
    inWindow.own.set(name(leaf), (inWindow.own.get(name(leaf)) ?? 0) + 1);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) seen.add(name(byId.get(id)!));
    for (const n of seen) inWindow.stacked.set(n, (inWindow.stacked.get(n) ?? 0) + 1);
  }
  const stack = urls.join(" ");
  row[0]!++;
  whole[0]!++;
  PARTS.forEach(([, re], k) => {
    if (re.test(stack)) row[k + 1]!++, whole[k + 1]!++;
  });
}
const pct = (a: number, b: number) => `${b ? ((100 * a) / b).toFixed(0) : "0"}%`;
console.log(`${path}: ${whole[0]} samples over ${((t - p.startTime) / 1e6).toFixed(1)} s`);
console.log(`| from s | samples | ${PARTS.map(([n]) => n).join(" | ")} |`);
console.log(`| --- | --- | ${PARTS.map(() => "---").join(" | ")} |`);
for (const [w, row] of [...windows].sort((a, b) => a[0] - b[0]))
  console.log(`| ${(w * windowUs) / 1e6} | ${row[0]} | ${row.slice(1).map((x) => pct(x, row[0]!)).join(" | ")} |`);
console.log(`| all | ${whole[0]} | ${whole.slice(1).map((x) => pct(x, whole[0]!)).join(" | ")} |`);
console.log("\nMost samples of their own:");
for (const [n, c] of [...own].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${pct(c, whole[0]!).padStart(4)}  ${n}`);
if (inWindow.samples > 0) {
  console.log(`\nFrom ${from / 1e6} s to ${to / 1e6} s: ${inWindow.samples} samples. Most samples of their own:`);
  for (const [n, c] of [...inWindow.own].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`  ${pct(c, inWindow.samples).padStart(4)}  ${n}`);
  console.log("Most samples anywhere on their stack (React's and the scheduler's own frames left out):");
  for (const [n, c] of [...inWindow.stacked].filter(([n]) => !/react-reconciler|scheduler|\(root\)/.test(n)).sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`  ${pct(c, inWindow.samples).padStart(4)}  ${n}`);
}
