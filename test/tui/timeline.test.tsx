// The Timeline screen (8) on training runs recorded on an H100 and an H200, rendered by Ink at
// 80×24 and 200×60: one row a band, the held and the summed rows, the phase and range strips under
// them lined up with the bands (an activation begins in forward), ↑↓ Enter Esc and ← →; and the
// rows' text helpers on numbers whose picture is known.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { formatBytes } from "../../src/words";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { bandCells, rangeRuns, sparkRow, stepAxis } from "../../src/tui/screens/timeline-rows";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, replay } from "../../src/profiler";
import { until } from "../support/clock";

const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
const UP = "\x1b[A";
const DOWN = "\x1b[B";
const RIGHT = "\x1b[C";
const LEFT = "\x1b[D";

/** A recording played to its end, with the agent's names where it saved them. */
async function replayed(name: string) {
  const rec = openRingRecording(join(import.meta.dir, "..", "fixtures", `${name}.ring`));
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {
    // to the end
  }
  rec.close();
  return { pid: 4242, model, source: "replay" as const, socket: null, title: `${name}.ring`, ended: true };
}

async function mount(name: string, columns: number, rows: number) {
  const ctl = new Controller(null, 1000);
  const pm = await replayed(name);
  ctl.replay = pm;
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="timeline" />);
  const lines = () => plain(ui.lastFrame() ?? "").split("\n");
  await until(() => lines().some((l) => l.startsWith("pid 4242")));
  const keys = async (k: string, seen: (ls: string[]) => boolean) => {
    ui.stdin.write(k);
    await until(() => seen(lines()));
  };
  return { ui, lines, keys, model: pm.model };
}

/** The phase of each cell of the strip ("o━F━━B━"): a letter begins a run, the rule goes on with it. */
function stripPhases(line: string, from: number): string[] {
  const out: string[] = [];
  let cur = " ";
  for (const ch of [...line].slice(from)) out.push((cur = ch === "━" ? cur : ch));
  return out;
}

describe.each([
  [80, 24],
  [200, 60],
] as const)("%i×%i", (columns, rows) => {
  test("normal.ring's last step: bands with a row each, held and summed rows, phase and range strips that line up with them", async () => {
    const { ui, lines, model } = await mount("normal", columns, rows);
    const f = lines();
    for (const l of f) expect({ l, fits: Bun.stringWidth(l) <= columns }).toEqual({ l, fits: true });
    expect(f.length).toBeLessThan(rows);
    expect(f[0]).toContain("[8 Timeline]");
    const step = model.devices[0]!.steps.at(-1)!;
    expect(f[1]).toStartWith(`pid 4242  step ${step.step}: `);
    expect(f[1]).toContain(`peak ${formatBytes(step.peak_allocated)}`);
    expect(f[1]).toContain("in backward");
    // The rows: held first, the bands, the rest summed, allocated; as many bands as the height has room for.
    const held = f.findIndex((l) => l.startsWith("held from earlier steps"));
    const rest = f.findIndex((l) => /^\d+ other blocks, summed/.test(l));
    expect(held).toBe(4);
    expect(rest - held - 1).toBe(rows - 3 - 10);
    expect(f[rest + 1]).toMatch(/^allocated, from /);
    const bands = f.slice(held + 1, rest);
    for (const b of bands) expect(b).toMatch(/^(activation|temporary|other|gradient|earlier step, freed|block)\b.* [█▐▌]/);
    // Beneath: the phase strip (forward, then backward, then the optimizer) and the range strip.
    const phaseLine = f[rest + 2]!;
    const cellsAt = phaseLine.indexOf("phase ") + "phase ".length;
    expect(phaseLine.slice(cellsAt)).toMatch(/F━+.*B━+.*O/);
    expect(f[rest + 3]!.trimStart()).toStartWith("range ");
    expect(f[rest + 3]).toContain(columns >= 200 ? "train_step" : "tr");
    expect(f[rest + 4]).toMatch(/ 0 +\d+\.\d+ ms +\d+\.\d+ ms$/);
    // Every activation begins in a column forward holds (whole or in part), every band's cells are under the strip's columns.
    const phases = stripPhases(phaseLine, cellsAt);
    let activations = 0;
    for (const b of bands) {
      const cells = [...b].slice(cellsAt);
      expect(cells.length).toBeLessThanOrEqual(phases.length);
      if (!b.startsWith("activation")) continue;
      activations++;
      // A forward column, or one shared by forward and the phase before it (drawn ┈ by the Process
      // strip's rule, issue 39: a column takes a letter only where that phase held nearly all of it).
      expect(["F", "┈"]).toContain(phases[cells.findIndex((c) => c !== " ")]!);
    }
    expect(activations).toBeGreaterThan(3);
    ui.unmount();
  });

  test("↑↓ Enter: what is known of a block; Esc back to the bands, then to the Overview; ← → other steps", async () => {
    const { ui, lines, keys, model } = await mount("hf-gpt2", columns, rows);
    const last = model.devices[0]!.steps.at(-1)!.step;
    await keys(DOWN + DOWN, () => true);
    await keys("\r", (f) => f.some((l) => l.startsWith("size ")));
    const f = lines();
    for (const l of f) expect({ l, fits: Bun.stringWidth(l) <= columns }).toEqual({ l, fits: true });
    expect(f[2]).toBe("Esc: back to the bands");
    const text = f.join("\n");
    expect(text).toMatch(/^size +\d+\.\d+ [KMG]iB \([\d,]+ bytes\)$/m);
    expect(text).toMatch(/^allocated +at \+\d/m);
    expect(text).toMatch(/^freed +(at \+|not in this step|after this step)/m);
    expect(text).toMatch(/^address +0x[0-9a-f]+/m);
    // ↑↓ do not move a selection under the detail; Esc goes back to the list, at the same row.
    await keys(UP, () => true);
    await keys("\x1b", (ls) => ls.some((l) => l.startsWith("held from earlier steps")));
    // The held band opened: the parameters and AdamW state by name.
    await keys(UP + UP, () => true);
    await keys("\r", (ls) => ls.some((l) => l.includes("of these blocks are still alive now")));
    const heldText = lines().join("\n");
    for (const n of ["transformer.wte.weight", "exp_avg of transformer.wte.weight"]) expect(heldText).toContain(n);
    await keys("\x1b", (ls) => ls.some((l) => l.startsWith("held from earlier steps")));
    // ← an earlier step, → back, → the running one; no further.
    await keys(LEFT, (ls) => ls[1]!.startsWith(`pid 4242  step ${last - 1}:`));
    await keys(RIGHT, (ls) => ls[1]!.startsWith(`pid 4242  step ${last}:`));
    await keys(RIGHT, (ls) => ls[1]!.startsWith(`pid 4242  step ${last + 1} (running)`));
    await keys(RIGHT, () => true);
    expect(lines()[1]).toStartWith(`pid 4242  step ${last + 1} (running)`);
    await keys("\x1b", (ls) => ls[0]!.includes("[1 Overview]"));
    ui.unmount();
  });
});

describe("the rows' text", () => {
  test("a band: ▐ in the column it begins in, █ through, ▌ where it ends; an instant one still shows", () => {
    // Ten columns of 10 µs from 1000.
    expect(bandCells({ from_us: 1025, to_us: 1075 }, 1000, 10, 10)).toBe("  ▐████▌  ");
    expect(bandCells({ from_us: 1000, to_us: 1100 }, 1000, 10, 10)).toBe("██████████");
    expect(bandCells({ from_us: 1042, to_us: 1042 }, 1000, 10, 10)).toBe("    ▌     ");
    expect(bandCells({ from_us: 1025, to_us: 1075 }, 1000, 10, 10, true)).toBe("  [####]  ");
    // Times as the records carry them (µs since 1970): no cell lost to rounding at the window's end.
    const start = 1795361664216488.5;
    expect(bandCells({ from_us: start, to_us: start + 5576 }, start, 5576 / 42, 42)).toBe("█".repeat(42));
  });

  test("a series in eighths from a floor to its maximum; not known stays blank", () => {
    expect(sparkRow([0, 4, 8, null], 8)).toBe(" ▄█ ");
    expect(sparkRow([4, 6, 8, null], 8, false, 4)).toBe("▁▄█ ");
    expect(sparkRow([1, 8], 8, true)).toBe(".#");
  });

  test("ranges as runs of their names; the axis from 0 to the step's length", () => {
    const runs = rangeRuns(["data", "data", "data", "data", "data", "data", null, "train_step", "train_step", "train_step", "x"]);
    expect(runs.map((r) => r.text).join("")).toBe("data ─ tr…│");
    expect(stepAxis(40, 5680)).toBe(`0${" ".repeat(16)}2.84 ms${" ".repeat(9)}5.68 ms`);
  });
});
