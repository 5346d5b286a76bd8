// `gpumem-tui view` of a snapshot recorded with stacks="python" (test/fixtures/snapshots/
// stacks-python, taken on an H100) in a real terminal (tmux, test/support/tmux.ts): the Tensors
// screen names the line of the capture script that allocated each block, Enter on a block shows
// its whole stack with that line marked, Esc goes back, w groups by the line; as a user at an
// 80×24 and a 120×40 terminal reads it.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cannot, q, terminal } from "../support/tmux";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
const lineOf = (code: string) => SCRIPT.findIndex((l) => l.includes(code)) + 1;
// Each size its own terminal (test/support/tmux.ts names it) and monitor: concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 40_000) : test.skip(`${name} (${cannot})`, fn));

describe("view of a snapshot with stacks, in a real terminal", () => {
  for (const [cols, rows] of [
    [80, 24],
    [120, 40],
  ] as const) {
    inTerminal(`${cols}×${rows}: ALLOCATED AT, Enter on a block shows its stack, Esc back, w groups by line`, async () => {
      const t = terminal(`view-stacks-${cols}`, `NO_COLOR=1 ${q(process.execPath)} ${q(CLI)} view ${q(join(DIR, "stacks-python.pickle.gz"))}`, cols, rows);
      try {
        // view opens on Process (issue 39: a snapshot opens on the screen that answers most): its step line says it has read the file.
        await t.until(/Step \d+: peak/);
        t.keys("3");
        const table = await t.until("ALLOCATED AT");
        const lines = table.split("\n");
        for (const l of lines) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
        const header = lines.findIndex((l) => l.includes("ALLOCATED AT"));
        // AdamW's state: allocated in the first opt.step() of the recording
        const state = lines.findIndex((l, i) => i > header && / optimizer_state /.test(l));
        expect(lines[state]).toContain(`.py:${lineOf("opt.step()")} step`);
        // a block alone on its row (not a group of alike ones), with the script's line
        const one = lines.findIndex((l, i) => i > header && /^ +[\d.]+ (B|KiB|MiB) \S/.test(l) && /\.py:\d+ step *$/.test(l));
        expect(one).toBeGreaterThan(header);
        const line = Number(/\.py:(\d+) step *$/.exec(lines[one]!)![1]);
        t.keys(...Array.from({ length: one - header - 1 }, () => "j"), "Enter");
        const stack = await t.until("Esc: back to the table");
        expect(stack).toMatch(new RegExp(`Allocated at /.*capture_snapshots\\.py:${line} step`));
        const marked = stack.split("\n").filter((l) => l.startsWith("▶"));
        expect(marked).toHaveLength(1);
        expect(marked[0]).toContain(`capture_snapshots.py:${line} step`);
        for (const l of stack.split("\n")) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
        t.keys("Escape");
        await t.until("ALLOCATED AT");
        t.keys("w");
        const grouped = await t.until(/\d+ blocks +\S*capture_snapshots\.py:\d+ step|\d+ blocks +…\S*\.py:\d+ step/);
        expect(grouped).toContain("w: alike blocks");
        t.keys("q");
        await t.until("exit status 0");
      } finally {
        t.close();
      }
    });
  }
});
