// Issue 39, item 2: every essential line fits, from 200×60 down to a tmux split of 60×15, on the
// committed recordings (the GPT-2 leak among them) and a snapshot: no line wider than the terminal,
// no figure cut ("2.…", "19.19" / "GiB" on the next line), the Tensors SIZE whole, names cut in
// their middle (c_fc and c_proj told apart), a path said in full. The real terminal: ./narrow-terminal.test.ts.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import type { ProcessModel } from "../../src/collect/live";
import { createModel, type BlockLine } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { cutMiddle, cutWords, flow, formatBytes, messageLines } from "../../src/tui/format";
import { SCREENS } from "../../src/tui/registry";
import { groupCell, tensorColumns } from "../../src/tui/screens/tensor-table";
import { cutCommand } from "../../src/tui/screens/process-table";
import { until } from "../support/clock";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const SIZES = [[60, 15], [72, 24], [80, 24], [120, 40], [200, 60]] as const;
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

/** Where a line cuts a figure: a digit (or a figure's decimal point) right before "…". */
export const cutFigure = (line: string) => /[\d.]…/.test(line);

async function recording(file: string): Promise<ProcessModel & { source: "replay" }> {
  const rec = openRingRecording(join(FIXTURES, file));
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model }));
  rec.close();
  return { pid: 4242, model, source: "replay", socket: null, title: file, ended: true };
}

async function snapshot(file: string): Promise<ProcessModel & { source: "replay" }> {
  const { model } = snapshotModel(await readSnapshotFile(join(FIXTURES, "snapshots", file)), { keepTrace: true, resync: true });
  return { pid: 0, model, source: "replay", socket: null, title: file, ended: true };
}

/** Every screen's lines at `columns`×`rows`, by key. */
async function everyScreen(pm: ProcessModel & { source: "replay" }, columns: number, rows: number) {
  const ctl = new Controller(null, 1000);
  ctl.replay = pm;
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
  const out: Record<string, string[]> = {};
  try {
    for (const s of SCREENS) {
      ui.stdin.write(s.key);
      await until(() => /\[\d /.test(plain(ui.lastFrame()!).split("\n")[0]!) && plain(ui.lastFrame()!).split("\n")[0]!.includes(`[${s.key}`));
      out[s.key] = plain(ui.lastFrame()!).split("\n");
    }
  } finally {
    ui.unmount();
  }
  return out;
}

describe("cutting without losing a figure", () => {
  test("a tensor's name is cut in its middle, at its dots: the block and the tensor both show, c_fc and c_proj apart", () => {
    expect(cutMiddle("transformer.h.7.mlp.c_proj.weight", 29)).toBe("transformer.h.7…c_proj.weight");
    for (const w of [20, 22, 25, 29]) {
      const fc = cutMiddle("transformer.h.7.mlp.c_fc.weight", w);
      const proj = cutMiddle("transformer.h.7.mlp.c_proj.weight", w);
      expect(Bun.stringWidth(fc)).toBeLessThanOrEqual(w);
      expect(Bun.stringWidth(proj)).toBeLessThanOrEqual(w);
      expect(fc).not.toBe(proj);
      expect(fc.startsWith("transfor")).toBe(true);
    }
  });

  test("a sentence is cut after a whole word, a figure never without its unit", () => {
    const s = "  warning: memory held at step boundaries grows by 1.98 MiB per step over steps 1..39";
    for (let w = 12; w < s.length; w++) {
      const c = cutWords(s, w);
      expect(Bun.stringWidth(c)).toBeLessThanOrEqual(w);
      expect(c).not.toMatch(/\d…|\d …/);
      expect(c).not.toMatch(/by 1\.98…|by 1\.98$/);
    }
  });

  test("flow breaks a headline between pieces, never inside one", () => {
    const pieces = ["allocated 1.22 GiB", "reserved 3.27 GiB", "peak 77.15 GiB", "NVML n/a", "non-PyTorch n/a"];
    expect(flow(pieces, 80)).toEqual([[0, 1, 2, 3, 4]]);
    const at59 = flow(pieces, 59);
    expect(at59.length).toBe(2);
    for (const line of at59) expect(line.map((i) => pieces[i]).join("  ").length).toBeLessThanOrEqual(59);
  });

  test("a message's path is said in full on lines of its own, wrapped where it is wider than one", () => {
    const log = "/tmp/gpumem-tui-run-2200-fb36c8e1d2a94f0b/hf_gpt2_leak.py.output.log";
    const lines = messageLines(`pid 2200 exited with status 1 (q quits); its output is in\n${log}`, 60);
    expect(lines[0]).toMatch(/^pid 2200 exited with status 1/);
    expect(lines.slice(1).join("")).toBe(log);
    for (const l of lines) expect(Bun.stringWidth(l)).toBeLessThanOrEqual(60);
    expect(messageLines("resumed", 60)).toEqual(["resumed"]);
  });

  test("COMMAND keeps the script whole and its first arguments, each whole (\" …\" for those left out, never \"30…\")", () => {
    expect(cutCommand("", "hf_gpt2_leak.py --steps 70 --leak", 30)).toBe("hf_gpt2_leak.py --steps 70 …");
    expect(cutCommand("", "hf_gpt2_leak.py --steps 70 --leak", 60)).toBe("hf_gpt2_leak.py --steps 70 --leak");
    expect(cutCommand("[rec] ", "hf_gpt2.py --seconds 30", 17)).toBe("[rec] hf_gpt2.py…") // no room for " …": the script whole, then "…";
    expect(cutCommand("[rec] ", "hf_gpt2.py --seconds 30", 12)).toBe("[rec] hf_gp…");
    // A replay's file name alone: cut in its middle, its end naming the file (never "leak.…").
    expect(cutCommand("! [rec] ", "hf-gpt2-leak.ring.gz", 22)).toBe("! [rec] hf-gpt…ring.gz");
  });
});

describe("the Tensors table", () => {
  const block = (over: Partial<BlockLine>): BlockLine =>
    ({ address: 0, size_bytes: 128 * 2 ** 20, stream: 0, time_us: 0, step: 3, phase: "forward", range: 0, range_name: null, name: null, name_source: null, shape: null, dtype: null, label: "", category: "activation", category_source: "lifetime", stack: 0, ...over }) as BlockLine;

  test("315 × 128.00 MiB: the count has its own column, SIZE is never cut, at every width", () => {
    const group = Array.from({ length: 315 }, (_, i) => block({ address: i * 2 ** 27 }));
    for (const [width] of SIZES) {
      const cols = tensorColumns(width, { count: 315, shapes: false });
      expect(cols.reduce((s, c) => s + c.width, 0)).toBeLessThanOrEqual(width - 1);
      const count = cols.find((c) => c.count)!;
      const size = cols.find((c) => c.sort === "size" && !c.count)!;
      expect(groupCell(count, group, 0).length).toBeLessThanOrEqual(count.width - 1);
      expect(groupCell(size, group, 0)).toBe(`${formatBytes(128 * 2 ** 20)} `);
      // The widest figure formatBytes writes fits SIZE too.
      expect(`${formatBytes(1023.99 * 2 ** 20)} `.length).toBeLessThanOrEqual(size.width);
    }
  });
});

describe("every screen at 60×15 … 200×60: no line wider than the terminal, no figure cut", () => {
  const sources: [string, () => Promise<ProcessModel & { source: "replay" }>][] = [
    ["the GPT-2 leak recording", () => recording("hf-gpt2-leak.ring.gz")],
    ["the OOM recording", () => recording("oom.ring")],
    ["a snapshot with stacks", () => snapshot("stacks-python.pickle.gz")],
  ];
  for (const [what, load] of sources) {
    test(what, async () => {
      const pm = await load();
      for (const [columns, rows] of SIZES) {
        const screens = await everyScreen(pm, columns, rows);
        for (const [key, lines] of Object.entries(screens)) {
          for (const l of lines) {
            expect({ columns, key, l, fits: Bun.stringWidth(l) <= columns }).toEqual({ columns, key, l, fits: true });
            // The Timeline too (its "allocated, from 1.…" at 60 columns is a label that fits now).
            expect({ columns, key, l, cut: cutFigure(l) }).toEqual({ columns, key, l, cut: false });
          }
        }
        // Process: the step table's header on one line with PEAK (at 60 columns it wrapped, a row's PEAK cut).
        const head = screens["2"]!.find((l) => /^PHASE /.test(l));
        if (head) expect({ columns, head, peak: /ALLOCATED|HELD AT END/.test(head) && / PEAK/.test(head) }).toEqual({ columns, head, peak: true });
        // Tensors: one line a row (no blank line after each at 60×15), every size whole.
        const t = screens["3"]!;
        const header = t.findIndex((l) => /SIZE. CATEGORY/.test(l));
        expect(header).toBeGreaterThan(0);
        const body = t.slice(header + 1, t.length - 2).filter((l) => l.trim());
        expect(body.length).toBeGreaterThan(0);
        for (const l of body) expect({ columns, l, ok: /^\s*(\d+ ×\s+)?\d+(\.\d\d)? (B|KiB|MiB|GiB) \S/.test(l) }).toEqual({ columns, l, ok: true });
      }
    }, 60_000);
  }
});

describe("Findings below 80 columns", () => {
  test("its first line keeps whole words: the keys in fewer words, then none (never \"Enter …\")", async () => {
    const { findingsHead } = await import("../../src/tui/screens/findings");
    expect(findingsHead("pid 601: 1 finding", true, 119)).toBe("pid 601: 1 finding, most severe first  (↑ ↓ select, Enter opens)");
    expect(findingsHead("pid 601: 1 finding", true, 59)).toBe("pid 601: 1 finding  (↑ ↓, Enter opens)");
    expect(findingsHead("pid 601: 1 finding", true, 30)).toBe("pid 601: 1 finding");
  });
});
