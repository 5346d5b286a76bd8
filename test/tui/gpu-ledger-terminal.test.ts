// Issue 40 in a real terminal (tmux, test/support/tmux.ts): the demo's recorded H100 at 80x24 and
// 200x60. Its GPU's ledger is a line under the GPU's header, every figure whole, summing with the
// header's used and total; and the recording's first second (NVML's sample a second older than the
// replay's reserved: 1.27 GiB beside 18.46 GiB) no longer makes a "GiB appeared outside PyTorch"
// warning on the status line and a finding in the header's corner. The Process screen says the
// recorded process's ledger in words.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 90_000) : test.skip(`${name} (${cannot})`, fn));

/** "19.18 GiB" → bytes, at the screen's two decimals. */
const bytesOf = (n: string, unit: string) => Number(n) * 1024 ** ["B", "KiB", "MiB", "GiB"].indexOf(unit);

describe("the GPU's ledger on the demo's Overview", () => {
  for (const [cols, rows] of [[80, 24], [200, 60]] as const) {
    inTerminal(`${cols}×${rows}: a line under the GPU's header, no false warning once the recorded job holds its memory`, async () => {
      const t = terminal(`gpu-ledger-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} --demo`, cols, rows);
      try {
        // Once the recorded job holds its 19 GiB; then three seconds more.
        const line = cols >= 120 ? /^ +memory: processes \(1\) 19\.\d\d GiB/m : /^ +procs 19\.\d\d GiB/m;
        await t.until(line);
        await Bun.sleep(3000);
        const screen = t.pane();
        const lines = screen.split("\n");
        for (const l of lines) expect({ l, fits: Bun.stringWidth(l) <= cols }).toEqual({ l, fits: true });
        const at = lines.findIndex((l) => line.test(l));
        expect(lines[at - 2]).toMatch(/^GPU 0 /);
        const ledger = lines[at]!;
        expect(ledger).not.toMatch(/[\d.]…/);
        // The rows shown add up to the GPU's total on the header (to the screen's rounding).
        const figures = [...ledger.matchAll(/(−?[\d.]+) (B|KiB|MiB|GiB)/g)].map((m) => (m[1]!.startsWith("−") ? -1 : 1) * bytesOf(m[1]!.replace("−", ""), m[2]!));
        const total = /\/([\d.]+) (GiB)/.exec(lines[at - 2]!)!;
        expect(Math.abs(figures.reduce((a, b) => a + b, 0) - bytesOf(total[1]!, total[2]!))).toBeLessThan(0.02 * 2 ** 30);
        expect(screen).not.toContain("appeared outside PyTorch");
        expect(lines[0]).not.toMatch(/\d+ findings?/);
        // The Process screen: the recorded process's ledger in words (the document's, made at the
        // NVML sample's moment), what is outside PyTorch being the headline's non-PyTorch. At 24
        // lines that line is the first to give way (process.tsx), so only on the tall terminal.
        if (rows >= 40) {
          t.keys("2");
          const proc = await t.until(/outside PyTorch: CUDA context/);
          for (const l of proc.split("\n")) expect({ l, fits: Bun.stringWidth(l) <= cols }).toEqual({ l, fits: true });
          const outside = /([\d.]+ [KMG]iB) outside PyTorch: CUDA context [\d.]+ [KMG]iB, unexplained [\d.]+ [KMG]iB/.exec(proc)!;
          expect(proc).toContain(`non-PyTorch ${outside[1]}`);
        }
        t.keys("q");
        await t.until(/exit status \d/);
      } finally {
        t.close();
      }
    });
  }
});
