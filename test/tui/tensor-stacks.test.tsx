// `view` of a snapshot recorded with stacks: the Tensors screen says where each block was
// allocated (ALLOCATED AT: the line of the user's code), Enter on a block shows its whole stack with
// that line marked and Esc goes back, w groups the blocks by that line. On the leak run taken on an
// H100 (test/fixtures/snapshots/leak: six steps each keeping their logits), through the real model,
// rendered by Ink as `view` opens it; the expected lines come from the capture script and the file.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { userFrameRuleFromEnv } from "../../src/snapshot/block-stacks";
import { unpickle } from "../../src/snapshot/pickle";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { KEYS } from "../../src/tui/screens/help";
import { settle } from "../support/settle";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const FILE = join(DIR, "leak.pickle.gz");
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
const FORWARD_LINE = SCRIPT.findIndex((l) => l.includes("out = model(input_ids=x, labels=x)")) + 1;
const tick = () => settle(40);
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

/** The blocks alive at the end whose first frame of the script is `line` (the file read as a tree). */
function blocksAtLine(line: number): number {
  const root = unpickle(gunzipSync(readFileSync(FILE))) as { segments: { blocks: { state: string; frames: { filename: string; line: number }[] }[] }[] };
  let n = 0;
  for (const s of root.segments) for (const b of s.blocks) if (b.state === "active_allocated" && b.frames.find((f) => f.filename.endsWith("capture_snapshots.py"))?.line === line) n++;
  return n;
}

async function viewed(columns: number, rows: number) {
  const parsed = await readSnapshotFile(FILE);
  const { model } = snapshotModel(parsed, { keepTrace: true, resync: true, rule: userFrameRuleFromEnv({}) });
  const ctl = new Controller(null, 1000);
  ctl.replay = { pid: 0, model, source: "replay", socket: null, title: "snapshot", ended: true };
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="tensors" />);
  await tick();
  const frame = () => plain(ui.lastFrame()!).split("\n");
  const keys = async (...ks: string[]) => {
    for (const k of ks) ui.stdin.write(k);
    await tick();
  };
  return { ui, frame, keys };
}

describe("the Tensors screen of a snapshot with stacks", () => {
  test("ALLOCATED AT names the script's line; Enter shows the block's whole stack with that line marked; Esc goes back", async () => {
    const { ui, frame, keys } = await viewed(120, 40);
    const header = frame().findIndex((l) => l.includes("SIZE▼"));
    expect(frame()[header]).toMatch(/NAME +ALLOCATED AT/);
    expect(frame()[2]).toContain("w: group by your line");
    // the logits of five steps: one row, allocated at the forward's line
    const logits = frame().findIndex((l) => /^ *5 × 1000\.00 KiB activation .* capture_snapshots\.py:(\d+) step *$/.test(l));
    expect(logits).toBeGreaterThan(header);
    expect(frame()[logits]).toContain(`capture_snapshots.py:${FORWARD_LINE} step`);
    // blocks from before the recording (the parameters) have no frames
    expect(frame().some((l) => / parameter .*\(no frames recorded\)/.test(l))).toBe(true);

    // open the group, then a block of it
    await keys(..."j".repeat(logits - header - 1).split(""), "\r", "j", "\r");
    const stack = frame();
    expect(stack[1]).toMatch(new RegExp(`^Allocated at /.*/capture_snapshots\\.py:${FORWARD_LINE} step`));
    expect(stack[2]).toMatch(/^1000\.00 KiB, activation, \(forward, in train_step, step \d\)/);
    const marked = stack.filter((l) => l.startsWith("▶"));
    expect(marked).toHaveLength(1);
    expect(marked[0]).toMatch(new RegExp(`capture_snapshots\\.py:${FORWARD_LINE} step`));
    // the whole stack, innermost first: torch's Linear first, the script's frames last
    expect(stack.find((l) => /^ +0 /.test(l))).toMatch(/torch\/nn\/modules\/linear\.py:\d+ forward/);
    expect(stack.some((l) => /capture_snapshots\.py:\d+ <module>/.test(l))).toBe(true);
    expect(stack.join("\n")).toContain("Esc: back to the table");

    await keys("\x1b");
    await tick(); // a lone Esc is told from an escape sequence after 50 ms
    await tick();
    expect(frame().findIndex((l) => l.includes("SIZE▼"))).toBe(header);
    expect(frame().find((l) => l.includes("▾ (5 unnamed"))).toBeDefined(); // the group still open
    ui.unmount();
  });

  test("w: one row per line of the script, bytes and blocks summed; again: alike blocks", async () => {
    const { ui, frame, keys } = await viewed(120, 40);
    await keys("w");
    expect(frame()[2]).toContain("w: alike blocks");
    const row = frame().find((l) => l.includes(`capture_snapshots.py:${FORWARD_LINE} step`))!;
    expect(row).toMatch(new RegExp(` ${blocksAtLine(FORWARD_LINE)} blocks `));
    const opt = frame().find((l) => l.includes(`capture_snapshots.py:${SCRIPT.findIndex((l) => l.includes("opt.step()")) + 1} step`))!;
    expect(opt).toMatch(/^ +4\.13 MiB optimizer_state +56 blocks /); // AdamW's state: twice the 2.06 MiB of parameters
    await keys("w");
    expect(frame().some((l) => /^ *5 × 1000\.00 KiB activation/.test(l))).toBe(true);
    ui.unmount();
  });

  test("at 80×24 every line fits, and ALLOCATED AT keeps the line number", async () => {
    const { ui, frame, keys } = await viewed(80, 24);
    for (const l of frame()) expect({ l, fits: [...l].length <= 80 }).toEqual({ l, fits: true });
    expect(frame().some((l) => l.includes(`.py:${FORWARD_LINE} step`))).toBe(true);
    await keys("j", "\r");
    for (const l of frame()) expect({ l, fits: [...l].length <= 80 }).toEqual({ l, fits: true });
    expect(frame().filter((l) => l.startsWith("▶"))).toHaveLength(1);
    ui.unmount();
  });

  test("Help lists w", () => {
    expect(KEYS.find(([k]) => k === "w")?.[1]).toContain("group the blocks by the line of your code");
  });
});
