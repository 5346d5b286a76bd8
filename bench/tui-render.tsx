// Rendering one Overview frame: 8 GPUs, 50 processes, 200×60, through Ink (renderToString: the
// same components, layout and text the terminal gets), beside serializing the same document
// as JSON (the cheapest view of it).
//   NODE_ENV=production bun bench/tui-render.tsx [OUT_DIR]   (React's build as the monitor loads it)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { render, renderToString } from "ink";
import type { Document } from "../src/system/schema";
import { App } from "../src/tui/app";
import { Controller } from "../src/tui/controller";
import recorded from "../test/fixtures/h100-training.json";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
// Eight copies of the H100 recorded on the device, 50 processes spread over them.
const base = recorded as unknown as Document;
const doc: Document = {
  ...base,
  devices: Array.from({ length: 8 }, (_, i) => ({ ...base.devices[0]!, index: i, uuid: `${base.devices[0]!.uuid}-${i}` })),
  processes: Array.from({ length: 50 }, (_, i) => ({ ...base.processes[0]!, pid: 1000 + i, device: i % 8, used_bytes: (i + 1) * 2 ** 28 })),
};
const ctl = new Controller(null, 1000);
ctl.doc = doc;
for (const d of doc.devices) ctl.history.set(d.index, { util: Array.from({ length: 600 }, (_, k) => (k * 7) % 100), memUsed: Array.from({ length: 600 }, (_, k) => k * 2 ** 26) });
const frame = () => renderToString(<App ctl={ctl} ascii={false} size={{ columns: 200, rows: 60 }} />, { columns: 200 });
for (let i = 0; i < 20; i++) frame();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ink: number[] = [];
const json: number[] = [];
for (let i = 0; i < 100; i++) {
  let t = performance.now();
  const out = frame();
  ink.push(performance.now() - t);
  if (!out.includes("GPU 7")) throw new Error("the frame lacks GPU 7");
  t = performance.now();
  JSON.stringify(doc);
  json.push(performance.now() - t);
}
// The live path: one mounted app, re-rendered per sample (what the monitor does every interval).
const sink = Object.assign(new Writable({ write: (_c, _e, cb) => cb() }), { columns: 200, rows: 60, isTTY: true });
const live: number[] = [];
// Whole update: from the sample's notify to the frame handed to the terminal (React, Yoga, text, write).
const whole: number[] = [];
let t0 = 0;
// A terminal's stdin as Ink wants it (raw mode), with no keys ever typed.
const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => stdin, ref: () => stdin, unref: () => stdin });
const inst = render(<App ctl={ctl} ascii={false} size={{ columns: 200, rows: 60 }} />, {
  stdout: sink as unknown as NodeJS.WriteStream,
  stdin: stdin as unknown as NodeJS.ReadStream,
  patchConsole: false,
  interactive: true,
  exitOnCtrlC: false,
  maxFps: 100000,
  onRender: (m) => {
    live.push(m.renderTime);
    if (t0) whole.push(performance.now() - t0), (t0 = 0);
  },
});
for (let i = 0; i < 120; i++) {
  ctl.doc = { ...doc, time_unix_ms: doc.time_unix_ms + i };
  t0 = performance.now();
  ctl.notify();
  await Bun.sleep(2);
}
inst.unmount();
const liveMs = live.slice(20);
const wholeMs = whole.slice(20);
if (wholeMs.length < 50) throw new Error(`only ${whole.length} live frames were rendered`);
const r = { live_rerender_ms_median: +median(liveMs).toFixed(2), live_frames: liveMs.length, live_update_ms_median: +median(wholeMs).toFixed(2), live_update_ms_p95: +[...wholeMs].sort((a, b) => a - b)[Math.floor(wholeMs.length * 0.95)]!.toFixed(2), date: new Date().toISOString(), frame_ms_median: +median(ink).toFixed(2), frame_ms_p95: +[...ink].sort((a, b) => a - b)[94]!.toFixed(2), json_ms_median: +median(json).toFixed(3) };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "tui-render.json"), `${JSON.stringify(r, null, 2)}\n`);
const md = `# Rendering an Overview frame

Command: \`${process.env.NODE_ENV ? `NODE_ENV=${process.env.NODE_ENV} ` : ""}bun bench/tui-render.tsx\` (React's ${process.env.NODE_ENV === "production" ? "production build, as the monitor loads it" : "development build"}; ${r.date}, this repository's 2-core machine). 8 GPUs (the H100 document
recorded on the device, copied), 50 processes, 200×60, braille charts of 600 samples, 100 frames after 20.

| what | median | p95 |
| --- | --- | --- |
| the monitor's update per sample, mounted screen: notify → React → Yoga → text → written | ${r.live_update_ms_median} ms | ${r.live_update_ms_p95} ms |
| of which Ink's output step (its own renderTime) | ${r.live_rerender_ms_median} ms | |
| a whole frame from nothing (renderToString: mount, Yoga layout, text) | ${r.frame_ms_median} ms | ${r.frame_ms_p95} ms |
| JSON.stringify of the same document | ${r.json_ms_median} ms | |

Target: under 10 ms a frame. The monitor keeps one screen mounted and re-renders it per sample (the first
row); a frame built from nothing (second row) happens only at start.
`;
writeFileSync(join(outDir, "tui-render.md"), md);
console.log(md);
