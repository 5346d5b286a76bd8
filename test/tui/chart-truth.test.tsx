// What the charts say is so: round ticks on rows that hold their values, time labels centred on
// the column of their time, and a phase strip that draws a phase only where it held a column
// (the demo, an H100 GPT-2 at 12 steps a second: 83 ms steps under 96 ms columns at 80 columns
// read as one backward of six seconds, `OB━━━━…`).
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { DEMO_RING } from "../../src/collect/demo";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay } from "../../src/profiler";
import { byteScale, PERCENT_SCALE, phaseStrip, roundUp, tickLabel, timeAxis, yAxis, GUTTER } from "../../src/tui/chart";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { until } from "../support/clock";

const GiB = 1024 ** 3;
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("round ticks", () => {
  test("79.6 GiB reads 0 / 40 / 80 GiB, 100 % reads 0 / 50 / 100%, each on the row whose band holds it", () => {
    const gpu = byteScale(79.6 * GiB);
    expect(gpu.top).toBe(80 * GiB);
    const rows = yAxis(6, gpu).map((l) => l.slice(0, GUTTER - 2).trim());
    expect(rows).toEqual(["80 GiB", "", "40 GiB", "", "", "0"]);
    // Row 2 from the top is row 3 from the bottom of 6: it holds 3/6 to 4/6 of the top, 40 GiB at its foot.
    expect(yAxis(5, PERCENT_SCALE).map((l) => l.slice(0, GUTTER - 2).trim())).toEqual(["100%", "", "50%", "", "0"]);
    expect(yAxis(12, byteScale(18.46 * GiB)).map((l) => l.slice(0, GUTTER - 2).trim()).filter(Boolean)).toEqual(["20 GiB", "15 GiB", "10 GiB", "5 GiB", "0"]);
    expect(byteScale(144 * 1024 ** 2).top).toBe(160 * 1024 ** 2);
    expect([0.07, 1, 1.18, 3.3, 45, 100, 101].map(roundUp)).toEqual([0.08, 1, 1.2, 4, 50, 100, 120]);
  });
});

describe("true time labels", () => {
  test("94 s over 109 columns: ticks at round times, each centred on its column; 'now' at the edge", () => {
    const span = 94e6;
    const width = 109;
    const axis = timeAxis(width, span, "now").slice(GUTTER);
    expect(axis.endsWith("now")).toBe(true);
    const labels = [...axis.matchAll(/-[\d.]+ (ms|s|min|h)/g)];
    expect(labels.map((m) => m[0])).toEqual(["-90 s", "-75 s", "-60 s", "-45 s", "-30 s", "-15 s"]);
    for (const m of labels) {
      const seconds = Number(m[0].replace(/[^\d.]/g, ""));
      const column = Math.floor(((span - seconds * 1e6) / span) * width);
      expect({ label: m[0], centre: m.index! + Math.floor(m[0].length / 2) }).toEqual({ label: m[0], centre: column });
    }
    // One unit along an axis, that of the ticks' spacing: 150 s in ticks of 30 s, 2 min in ticks of a minute.
    expect([tickLabel(150e6, 30e6), tickLabel(120e6, 60e6), tickLabel(5e5, 1e5), tickLabel(5400e6, 1800e6), tickLabel(7200e6, 3600e6)]).toEqual(["-150 s", "-2 min", "-500 ms", "-90 min", "-2 h"]);
  });
});

describe("the phase strip", () => {
  const col = (o: number, f: number, b: number, opt: number) => [o, f, b, opt];
  test("a column one phase held is drawn as it; several phases in a column are drawn as such, their shares in the legend; no record: blank", () => {
    // Shares in µs of columns of 100 µs; the last one the records cover for 40 µs only.
    const shares = [...col(0, 0, 0, 0), ...col(0, 100, 0, 0), ...col(0, 97, 3, 0), ...col(2, 20, 75, 3), ...col(0, 0, 100, 0), ...col(0, 0, 40, 0)];
    const { runs, legend } = phaseStrip(shares, 100);
    expect(runs.map((r) => r.text).join("")).toBe(" F━┈B ");
    expect(legend).toBe("┈ phases mixed in a 100 µs column: F 20% B 75% O 3% o 2%  F forward  B backward  blank: no record kept");
    expect(phaseStrip(shares, 100, true).runs.map((r) => r.text).join("")).toBe(" F-.B ");
  });

  for (const [columns, rows] of [
    [80, 24],
    [200, 60],
  ] as const) {
    test(`the demo (12 steps a second) on the Process screen at ${columns}×${rows}: no phase drawn longer than it lasted, none through several steps`, async () => {
      const rec = openRingRecording(DEMO_RING);
      const model = createModel().keepTrace();
      for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {
        // to the end
      }
      rec.close();
      const ctl = new Controller(null, 1000);
      ctl.replay = { pid: 4242, model, source: "replay", socket: null, title: "demo", ended: true };
      const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="process" />);
      try {
        const lines = () => plain(ui.lastFrame() ?? "").split("\n");
        await until(() => lines().some((l) => /^ +phase /.test(l)));
        const strip = lines().find((l) => /^ +phase /.test(l))!.slice(GUTTER);
        const d = model.devices[0]!;
        const steps = d.steps.slice(1);
        const stepUs = steps.reduce((a, s) => a + s.end_us - s.start_us, 0) / steps.length;
        const span = d.lastTime_us - d.firstTime_us;
        const columnUs = span / (columns - 2 - GUTTER);
        // After the first step (the warm-up), no run of one phase (its letter and rule) is longer
        // than the longest phase any step had (within a column at either end), nor than a step:
        // never one phase drawn through several steps.
        const first = d.steps[0]!;
        const after = strip.slice(Math.ceil((first.end_us - d.firstTime_us) / columnUs) + 1);
        const longest = Math.max(0, ...[...after.matchAll(/[oFBO]━*/g)].map((m) => m[0].length));
        const longestPhaseUs = Math.max(...steps.map((s) => Math.max(...s.phDuration)));
        expect(longest * columnUs).toBeLessThan(longestPhaseUs + 2 * columnUs);
        expect((longest - 2) * columnUs).toBeLessThan(stepUs);
        expect(after).toContain("┈");
        // the first step's forward (the warm-up: its phase time in the breakdown, 463 ms) drawn as
        // one run of its length, within a column at either end
        const forward = [...strip.slice(0, Math.ceil((first.end_us - d.firstTime_us) / columnUs) + 1).matchAll(/F━*/g)].map((m) => m[0].length);
        expect(Math.abs(Math.max(...forward) * columnUs - first.phDuration[1]!)).toBeLessThan(2 * columnUs);
      } finally {
        ui.unmount();
      }
    });
  }
});
