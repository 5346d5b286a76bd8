// What the screens say, as nvtop, htop and memory_viz users read them: axes and a legend on the
// Process charts, one peak, unknown as "–", what SHARE OF PEAK leaves out, per-process SM / CPU /
// host memory / run time on the Overview, and a segment opened to its blocks with names, shapes
// and dtypes. Recorded runs (H100, H200) through the real model, rendered by Ink.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createModel, resyncFromSnapshot, segmentInside } from "../../src/profiler";
import { openRingRecording } from "../../src/collect/recording";
import { replay } from "../../src/profiler/replay";
import { FWD, MiB, OTHER, Trace } from "../profiler/trace";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";
import { DocumentSchema, type Document } from "../../src/system/schema";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import type { ScreenId } from "../../src/tui/registry";
import { segmentsInOrder } from "../../src/tui/screens/segments";
import { settle } from "../support/settle";

const FIX = join(import.meta.dir, "..", "fixtures");
const tick = () => settle(40);
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

async function replayed(name: string) {
  const rec = openRingRecording(join(FIX, `${name}.ring`));
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {
    // to the end
  }
  rec.close();
  return { pid: 4242, model, source: "replay" as const, socket: null, title: `${name}.ring`, ended: true };
}

function mount(ctl: Controller, columns: number, rows: number, initialScreen: ScreenId = "overview") {
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen={initialScreen} />);
  return { ui, lines: () => plain(ui.lastFrame()!).split("\n") };
}

function fits(lines: string[], columns: number, rows: number) {
  for (const l of lines) expect({ line: l, fits: [...l].length <= columns }).toEqual({ line: l, fits: true });
  expect(lines.length).toBeLessThan(rows);
}

describe("the Process charts", () => {
  test("axes in bytes and time, a legend for the phase letters, one peak, torch's, and the chart's mark at it", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const { ui, lines } = mount(ctl, 120, 40, "process");
    await tick();
    const f = lines();
    const text = f.join("\n");
    expect(f.filter((l) => /^ +160 MiB ┤/.test(l)).length).toBe(2); // both charts, scaled alike to a round top (144 MiB reserved)
    expect(f.filter((l) => /^ +80 MiB ┤/.test(l)).length).toBe(2); // and its half
    expect(f.filter((l) => /^ +0 ┤/.test(l)).length).toBe(2);
    expect(f.some((l) => /^ {11}-5 s +-4 s +-3 s +-2 s +-1 s +end$/.test(l))).toBe(true); // a second apart; the run ended: its end, not "now"
    // Its 20 steps of 6 ms in the last half second: columns of 48 ms hold several phases, drawn as such.
    expect(text).toMatch(/phase: ┈ phases mixed in a 47\.9 ms column: F \d+% B \d+% O \d+% o \d+%  F forward  o outside them/);
    // One peak: torch's max_memory_allocated. With torch's block sizes (issue 36) the records reach
    // it too, so no second figure is named (one is only with its cause: queries.ts peakOf).
    expect(text).toContain("allocated 83.10 MiB  reserved 144.00 MiB  peak 126.22 MiB  NVML");
    expect(text).not.toContain("records 1");
    expect(text).toMatch(/peak 126\.22 MiB \^/);
    expect(text).toContain("SHARE OF PEAK: of the step's peak; the other 66% (83.10 MiB) was held from earlier steps");
    fits(f, 120, 40);
    ui.unmount();
  });

  test("where the records hold the peak (a ring cut from a GPT-2 run), the header and the chart say the same number", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("hf-gpt2");
    const { ui, lines } = mount(ctl, 100, 30, "process");
    await tick();
    const text = lines().join("\n");
    const header = /peak (\d+\.\d+ GiB)/.exec(text)![1]!;
    expect(text).toMatch(new RegExp(`\\^ peak ${header.replace(".", "\\.")}|peak ${header.replace(".", "\\.")} \\^`));
    expect(text).not.toContain("(torch; records");
    ui.unmount();
  });

  test("a snapshot's phases come from its frames and ranges: forward, backward and the optimizer each have figures, and the step's peak is in backward", async () => {
    const parsed = await readSnapshotFile(join(FIX, "normal-history.pickle"));
    const { model } = snapshotModel(parsed, { keepTrace: true });
    resyncFromSnapshot(model, parsed.root.segments as unknown as Parameters<typeof resyncFromSnapshot>[1], Math.max(...model.devices.map((d) => d.lastTime_us)));
    const ctl = new Controller(null, 1000);
    ctl.replay = { pid: 0, model, source: "replay", socket: null, title: "snapshot", ended: true };
    const { ui, lines } = mount(ctl, 100, 40, "process");
    await tick();
    const f = lines();
    // The allocator's block sizes, followed through the trace (src/profiler/large-pool.ts): the peak is
    // torch's max_memory_allocated (126.22 MiB, normal-history.facts.json), not the requests' 125.22.
    expect(f.find((l) => l.startsWith("forward "))).toMatch(/^forward +46\.14 MiB +12\.00 MiB +34\.14 MiB +120\.21 MiB +26%$/);
    expect(f.find((l) => l.startsWith("backward "))).toMatch(/^backward +124\.18 MiB .* 126\.22 MiB +7%$/);
    expect(f.find((l) => l.startsWith("optimizer "))).toMatch(/^optimizer +6\.03 MiB /);
    expect(f.join("\n")).toContain("peak 126.22 MiB in backward");
    // The shares are of the step's own allocations: the rest of the peak is said in words.
    expect(f.join("\n")).toContain("SHARE OF PEAK: of the step's peak; the other 66% (83.10 MiB) was held from earlier steps");
    ui.unmount();
  }, 20_000);

  test("phases a step never entered show –, never zeros (an evaluation loop: forward only)", async () => {
    const tr = new Trace().segment(0x1000_0000, 64 * MiB);
    for (let s = 0; s < 3; s++) {
      tr.setPhase(FWD).alloc(0x1000_0000, 4 * MiB).alloc(0x1040_0000, 2 * MiB).free(0x1040_0000, 2 * MiB).free(0x1000_0000, 4 * MiB);
      tr.setPhase(OTHER).nextStep();
    }
    const model = createModel().keepTrace();
    model.ingest(tr.batch());
    const ctl = new Controller(null, 1000);
    ctl.replay = { pid: 0, model, source: "replay", socket: null, title: "eval", ended: true };
    const { ui, lines } = mount(ctl, 100, 40, "process");
    await tick();
    const f = lines();
    expect(f.find((l) => l.startsWith("forward "))).toMatch(/^forward +6\.00 MiB /);
    for (const phase of ["backward", "optimizer"]) {
      const row = f.find((l) => l.startsWith(`${phase} `))!;
      expect(row.trim().split(/\s+/)).toEqual([phase, "–", "–", "–", "–", "–"]);
    }
    ui.unmount();
  }, 20_000);
});

describe("the Overview's process columns (nvtop, nvitop, htop)", () => {
  // An H100's document from a GPT-2 training, with the figures this version samples set.
  const doc = DocumentSchema.parse(JSON.parse(readFileSync(join(FIX, "h100-nvml.ndjson"), "utf8").trim().split("\n").at(-1)!)) as Document;
  const p = doc.processes[0]!;
  Object.assign(p, { gpu_sm_percent: 87, cpu_percent: 101.5, host_memory_bytes: 3 * 2 ** 30, run_time_seconds: 3725 });
  const other = { ...p, pid: 777, agent_pid: null, pytorch: null, command: "python3 infer.py", used_bytes: 2 ** 30, gpu_sm_percent: null, cpu_percent: null, host_memory_bytes: null, run_time_seconds: null };
  doc.processes.push(other);

  test("wide: SM%, CPU%, host memory and run time beside GPU memory; unknown is –", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = doc;
    const { ui, lines } = mount(ctl, 160, 40);
    await tick();
    const f = lines();
    const head = f.find((l) => l.startsWith("PID "))!;
    expect(head).toMatch(/^PID +USER +GPU +SM% +GPU MEM▼ +ALLOCATED +RESERVED +CPU% +HOST MEM +TIME PHASE +STEP COMMAND/);
    const row = f.find((l) => l.startsWith("946 "))!;
    expect(row).toMatch(/^946 +root +0 +87% +19\.18 GiB +\d+\.\d+ GiB +18\.46 GiB +102% +3\.00 GiB +1:02:05 backward/);
    const none = f.find((l) => l.startsWith("777 "))!;
    expect(none).toMatch(/^777 +root +0 +– +1\.00 GiB +– +– +– +– +– +infer\.py/);
    fits(f, 160, 40);
    ui.unmount();
  });

  // Issue 39 (COMMAND shows the script and its first arguments at 80 columns, two runs of one script
  // told apart) over an earlier choice that kept SM% here: PHASE (a training's phase sampled once an
  // interval reads as chance), SM% and, where every row is on one GPU, GPU give COMMAND their room.
  test("80 columns: PHASE and SM% give way to the command, as the host's figures do", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = doc;
    const { ui, lines } = mount(ctl, 80, 24);
    await tick();
    const f = lines();
    const head = f.find((l) => l.startsWith("PID "))!;
    // Every row is on GPU 0 (the header above names it): GPU gives way too.
    expect(head).toMatch(/^PID +GPU MEM▼ +ALLOCATED +RESERVED +STEP COMMAND/);
    expect(head).not.toContain("CPU%");
    expect(head).not.toContain("SM%");
    expect(head).not.toContain("PHASE");
    const row = f.find((l) => l.startsWith("946 "))!;
    expect(row).toMatch(/^946 +19\.18 GiB /);
    // At least 30 columns for COMMAND: the script and its first arguments.
    expect(80 - 1 - head.indexOf("COMMAND")).toBeGreaterThanOrEqual(30);
    fits(f, 80, 24);
    ui.unmount();
  }, 20_000);
});

describe("a segment opened (Enter on the Segments screen)", () => {
  test("its blocks in address order with names, shapes and dtypes, the free ranges between them; Esc goes back", async () => {
    const ctl = new Controller(null, 1000);
    const pm = await replayed("hf-gpt2");
    ctl.replay = pm;
    // The first segment in the list holding a named parameter with its shape.
    const segs = segmentsInOrder(pm);
    const at = segs.findIndex((s) => segmentInside(pm.model, { address: s.address })!.parts.some((x) => x.kind === "block" && x.block.name === "transformer.wpe.weight"));
    expect(at).toBeGreaterThanOrEqual(0);
    for (const [columns, rows] of [[120, 40], [80, 24]] as const) {
      const { ui, lines } = mount(ctl, columns, rows, "segments");
      await tick();
      ui.stdin.write(`${"j".repeat(at)}\r`); // one burst: each key counts, in order
      await tick();
      const f = lines();
      expect(f[1]).toStartWith(`segment 0x${segs[at]!.address.toString(16)}: `);
      expect(f[3]).toMatch(/^ +OFFSET +SIZE +NAME +SHAPE +DTYPE/);
      const inside = segmentInside(pm.model, { address: segs[at]!.address })!;
      const wpe = f.find((l) => l.includes("transformer.wpe.weight"))!;
      expect(wpe).toMatch(/^ *\+\d+(\.\d+)? [KMG]?i?B +512\.00 KiB +transformer\.wpe\.weight +256×512 +float32/);
      // Address order: offsets grow down the list.
      const offsets = f.slice(4).flatMap((l) => (/^ *\+\d/.test(l) ? [l.trim().split(/\s+/)[0]!] : []));
      expect(offsets.length).toBe(Math.min(inside.parts.length, rows - 3 - 4));
      fits(f, columns, rows);
      ui.stdin.write("\x1b");
      await settle(100); // a lone Esc waits a moment for a sequence
      expect(lines()[1]).toMatch(/^\d+ segments: /);
      ui.unmount();
    }
    // The largest segment, mostly free: its free ranges are rows too.
    const { ui, lines } = mount(ctl, 120, 40, "segments");
    await tick();
    ui.stdin.write("\r");
    await tick();
    expect(lines().filter((l) => /^ *\+\S+ [KMG]?i?B +\S+ [KMG]?i?B +\(free\)$/.test(l.trimEnd())).length).toBeGreaterThan(0);
    ui.unmount();
  }, 20_000);
});

describe("the mouse on the Segments screen", () => {
  test("a click selects the segment under it and Enter opens that one; in it a click selects a row; Esc goes back to the segment clicked", async () => {
    const ctl = new Controller(null, 1000);
    const pm = await replayed("hf-gpt2");
    ctl.replay = pm;
    const segs = segmentsInOrder(pm);
    const parts = (i: number) => segmentInside(pm.model, { address: segs[i]!.address })!.parts.length;
    // The segment with the most rows but one (the list ends on the one with the most).
    const many = segs.map((_, i) => i).sort((a, b) => parts(b) - parts(a))[1]!;
    expect(parts(many)).toBeGreaterThan(40);
    const { ui, lines } = mount(ctl, 120, 40, "segments");
    await tick();
    const hex = (a: number) => `0x${a.toString(16)}`;
    ui.stdin.write("G"); // the list's end, where both sit
    await tick();
    // Terminal rows count from 1, and the frame's first line is the tab line.
    const y = lines().findIndex((l) => l.startsWith(`${hex(segs[many]!.address)} `)) + 1;
    expect(y).toBeGreaterThan(1);
    ui.stdin.write(`\x1b[<0;5;${y}M\x1b[<0;5;${y}m\r`);
    await tick();
    expect(lines()[1]).toStartWith(`segment ${hex(segs[many]!.address)}: `);
    // A click on the last row shown selects it: one more row down scrolls the rows by one.
    const offsets = () => lines().flatMap((l) => (/^ *\+\d/.test(l) ? [l.trim().split(/\s+/)[0]!] : []));
    const before = offsets();
    const lastY = lines().findLastIndex((l) => /^ *\+\d/.test(l)) + 1;
    ui.stdin.write(`\x1b[<0;5;${lastY}M\x1b[<0;5;${lastY}mj`);
    await tick();
    expect(offsets()).toEqual([...before.slice(1), offsets().at(-1)!]);
    expect(offsets()[0]).not.toBe(before[0]);
    ui.stdin.write("\x1b");
    await settle(100); // a lone Esc waits a moment for a sequence
    expect(lines()[1]).toMatch(/^\d+ segments: /);
    ui.stdin.write("\r");
    await tick();
    expect(lines()[1]).toStartWith(`segment ${hex(segs[many]!.address)}: `);
    ui.unmount();
  }, 20_000);
});
