// The Timeline screen in a real terminal (tmux, test/support/tmux.ts), at 80×24 and at 200×60: a
// GPT-2 training recorded on an H200 replayed to its end, key 8, a block opened with Enter and
// closed with Esc, as a user at that terminal reads it. Lines fit, the frame stays below the
// terminal's height, the wide terminal gives its rows to more bands.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const RING = join(import.meta.dir, "..", "fixtures", "hf-gpt2.ring");
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 40_000) : test.skip(`${name} (${cannot})`, fn));

/** Rows of bands between the held row and the summed one. */
const bandRows = (lines: string[]) => lines.findIndex((l) => /^\d+ other blocks, summed/.test(l)) - lines.findIndex((l) => l.startsWith("held from earlier steps")) - 1;

describe("the Timeline in a real terminal", () => {
  for (const [cols, rows] of [
    [80, 24],
    [200, 60],
  ] as const) {
    inTerminal(`${cols}×${rows}: the last step's bands, Enter on one, Esc back`, async () => {
      const t = terminal(`timeline-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} replay ${q(RING)} --speed 50`, cols, rows);
      try {
        await t.until(/step 38 /, 20_000);
        t.keys("8");
        await t.until("[8 Timeline]");
        const text = await t.until("↑↓ a row");
        const lines = text.split("\n");
        for (const l of lines) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
        expect(lines[0]).toContain("[8 Timeline]");
        expect(lines[1]).toMatch(/^pid \d+ {2}step 37: \d+\.\d+ ms, peak \d+\.\d+ GiB at \+\d/);
        expect(bandRows(lines)).toBe(rows - 3 - 10);
        // The step's edges share their columns with the phases before and after it (drawn ┈ by the Process
        // strip's rule; at 200 columns the last step's optimizer and the time outside the phases show first).
        expect(lines.find((l) => /^ +phase [┈oO━]*F━+.*B━+.*O/.test(l))).toBeDefined();
        expect(text).toContain("train_step");
        // The status line is the last thing written: the frame is below the terminal's height.
        expect(lines.filter((l) => l.trim()).at(-1)).toMatch(/\? help|^replay of /);
        t.keys("Down", "Enter");
        const detail = await t.until(/^size +\d/m);
        expect(detail).toMatch(/^allocated +(at \+|before step 37)/m);
        expect(detail).toMatch(/^address +0x[0-9a-f]+/m);
        for (const l of detail.split("\n")) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
        t.keys("Escape");
        await t.until("↑↓ a row");
        t.keys("q");
        await t.until("exit status 0");
      } finally {
        t.close();
      }
    });
  }
});
