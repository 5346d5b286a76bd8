#!/usr/bin/env bun
// The idle Overview's tick, back to back: overview-redraw.tsx's frame (the H100 document recorded on
// the device without its process, its power and PCIe figures stepped every tick, the charts full and
// flat) drawn TICKS times a few ms apart, for a profiler to see where a changed frame's time goes
// (bun --cpu-prof-md), and the CPU a tick without the second between ticks.
//   NODE_ENV=production bun [--cpu-prof-md --cpu-prof-interval=200] bench/tui-idle-loop.tsx [TICKS] [TREE]
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { treeApp } from "./support/tree-app";

const ticks = Number(process.argv[2] ?? 300);
// GAP_MS: the time between ticks (the monitor's is its interval); STILL=1: nothing on the frame moves.
const gap = Number(process.env.GAP_MS ?? 3);
const still = process.env.STILL === "1";
const tree = resolve(process.argv[3] ?? join(import.meta.dir, ".."));
const { render, React, App, Controller, recorded } = await treeApp(tree);
const ctl = new Controller(null, 1000);
const base = { ...recorded, processes: [] };
// FILL=1 also shows the GPU as an idle one reads (nothing used, 0%): H200's in bench/results/gpu-2026-11-29c.
const d0 = process.env.FILL === "1" ? { ...base.devices[0], memory_used_bytes: 0, gpu_utilization_percent: 0 } : base.devices[0];
// FILL=1: the charts' history starts empty and fills a sample a tick, as in a monitor just started
// (what bench/gpu-parts/cost.sh's idle part measures: its seconds 5 to 30).
const fill = process.env.FILL === "1";
const h = fill ? { util: [] as number[], memUsed: [] as number[], timesMs: [] as number[] } : { util: Array(600).fill(0), memUsed: Array(600).fill(d0.memory_used_bytes), timesMs: Array.from({ length: 600 }, (_, i) => i * 1000) };
ctl.history.set(0, h);
let bytes = 0;
const stdout = Object.assign(new Writable({ write: (c, _e, cb) => ((bytes += c.length), cb()) }), { columns: 200, rows: 60, isTTY: true });
const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin, ref: () => stdin, unref: () => stdin, read: () => null });
const ink = render(React.createElement(App, { ctl, ascii: false }), { stdout, stdin, patchConsole: false, interactive: true, exitOnCtrlC: false, maxFps: 100000, incrementalRendering: true });
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const step = async (i: number) => {
  ctl.doc = { ...base, time_unix_ms: i * 1000, devices: [{ ...d0, power_draw_milliwatts: still ? 70_000 : 70_000 + (i % 5) * 1000, pcie_rx_bytes_per_second: still ? 1000 : 1000 + (i % 7) * 100 }] };
  h.util.push(0), h.memUsed.push(d0.memory_used_bytes), h.timesMs.push(600_000 + i * 1000);
  if (h.util.length > 600) h.util.shift(), h.memUsed.shift(), h.timesMs.shift();
  const c = cpu();
  await ctl.tick();
  // The frame's part: the tick and the drawing it asks (Ink draws within a few ms); the rest of the
  // gap is what runs while the monitor waits (the engine's collector and compiler threads among it).
  await Bun.sleep(Math.min(gap, 100));
  framed += cpu() - c;
  await Bun.sleep(gap - Math.min(gap, 100));
};
let framed = 0;
/** Each thread's CPU (clock ticks of 10 ms) by its name, digits dropped. */
function threads(): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of readdirSync("/proc/self/task")) {
    const st = readFileSync(`/proc/self/task/${t}/stat`, "utf8");
    const name = st.slice(st.indexOf("(") + 1, st.lastIndexOf(")")).replace(/\d+/g, "");
    const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
    out.set(name, (out.get(name) ?? 0) + Number(f[11]) + Number(f[12]));
  }
  return out;
}
// Past the first frames (WARM ticks, default 20; cost.sh's idle part starts measuring after ~4 s).
const warm = Number(process.env.WARM ?? 20);
for (let i = 0; i < warm; i++) await step(i);
bytes = 0;
framed = 0;
const th0 = threads();
const c0 = cpu();
const t0 = performance.now();
for (let i = warm; i < warm + ticks; i++) await step(i);
const c = cpu() - c0;
const th1 = threads();
const byThread = Object.fromEntries([...th1].map(([k, v]) => [k, +(((v - (th0.get(k) ?? 0)) * 10) / ticks).toFixed(2)]).filter(([, v]) => (v as number) > 0));
console.log(JSON.stringify({ tree, cpu_ms_a_tick: +(c / ticks).toFixed(2), frame_cpu_ms_a_tick: +(framed / ticks).toFixed(2), wall_ms_a_tick: +((performance.now() - t0) / ticks).toFixed(2), bytes_a_tick: Math.round(bytes / ticks), ms_a_tick_by_thread: byThread }));
ink.unmount();
process.exit(0);
