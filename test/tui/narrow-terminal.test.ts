// Issue 39, item 2 in a real terminal (tmux, test/support/tmux.ts), at the sizes of tmux splits and
// wide ones: the GPT-2 leak recording replayed to its end and the demo. Every line within the
// width, no figure cut ("2.…"), the GPU header's memory whole on its line at 72 columns, Tensors
// one line a row at 60×15 (it drew a blank line after each, two rows in all).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const LEAK = join(import.meta.dir, "..", "fixtures", "hf-gpt2-leak.ring.gz");
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 90_000) : test.skip(`${name} (${cannot})`, fn));

/** Every line of a screen within `cols`, and no figure cut where a line ends ("2.…", "77.15 G…"). */
function fits(screen: string, cols: number) {
  for (const l of screen.split("\n")) {
    expect({ l, fits: Bun.stringWidth(l) <= cols }).toEqual({ l, fits: true });
    expect({ l, cut: /[\d.]…|\d [KMG]…/.test(l) }).toEqual({ l, cut: false });
  }
}

describe("narrow and wide terminals", () => {
  for (const [cols, rows] of [[60, 15], [72, 24], [80, 24], [120, 40], [200, 60]] as const) {
    inTerminal(`${cols}×${rows}: the leak recording's Process, Tensors and Segments`, async () => {
      const t = terminal(`narrow-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} replay ${q(LEAK)} --speed 50`, cols, rows);
      try {
        await t.until(/replay finished|exit status/, 30_000).catch(() => "");
        t.keys("2");
        const process = await t.until(/allocated \d/);
        fits(process, cols);
        expect(process).toMatch(/reserved but unallocated [\d.]+ [KMG]iB now/);
        t.keys("3");
        const tensors = await t.until(/SIZE. CATEGORY/);
        fits(tensors, cols);
        const lines = tensors.split("\n");
        const header = lines.findIndex((l) => /SIZE. CATEGORY/.test(l));
        // One line a row, each starting with its whole size: no blank line between rows.
        const body = lines.slice(header + 1, header + 4);
        for (const l of body) expect(l).toMatch(/^\s*(\d+ ×\s+)?\d+(\.\d\d)? (B|KiB|MiB|GiB) \S/);
        t.keys("4");
        const segments = await t.until(/ADDRESS +SIZE/);
        fits(segments, cols);
        expect(segments).toMatch(/reserved but unallocated [\d.]+ [KMG]iB now/);
        t.keys("q");
        await t.until("exit status 0");
      } finally {
        t.close();
      }
    });
  }

  for (const [cols, rows] of [[60, 15], [72, 24], [80, 24]] as const) {
    inTerminal(`${cols}×${rows}: the demo's GPU header keeps its memory figures on one line`, async () => {
      const t = terminal(`narrow-demo-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} --demo`, cols, rows);
      try {
        await t.until(/GPU 0 .*MEM/);
        // Once the recorded job holds its 19 GiB (at 72 columns "19.19" / "GiB/79.65 GiB" wrapped):
        // the recorded GPU's line shows 19.xx, however the rest of its figure is laid out.
        const screen = await t.until(/^GPU \d+ \[rec\].* 19\.\d\d/m);
        expect(screen).not.toMatch(/ 0 B\//);
        expect(screen).toMatch(/GPU 0 .* [\d.]+ [KMG]?i?B\/\d+\.\d\d GiB\n/);
        fits(screen, cols);
        t.keys("q");
        await t.until(/exit status \d/);
      } finally {
        t.close();
      }
    });
  }
});
