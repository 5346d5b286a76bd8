// Issue 37: the Tensors screen of a recording whose hook captured stacks (the default) says where
// each block was allocated without being asked: ALLOCATED AT names the program's line, w groups by
// it with the bytes each line stands for. A ring recorded on the doubles by the real agent and the
// hook's walker (test/agent/lines_run.py: a leak of 2 MiB a step at line:keep), replayed into the
// model and rendered by Ink as `replay` shows it.
import { afterAll, describe, expect } from "bun:test";
import { render } from "ink-testing-library";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { stacksTest } from "../support/native";
import { cleanLines, markedAt, modelOfLines, recordLines } from "../support/lines-run";
import { settle } from "../support/settle";

afterAll(cleanLines);

const tick = () => settle(40);
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("the Tensors screen of a ring with the hook's stacks", () => {
  stacksTest("ALLOCATED AT names the kept tensors' line; w groups them under it with their bytes", async () => {
    const model = modelOfLines(recordLines("leak"));
    const ctl = new Controller(null, 1000);
    ctl.replay = { pid: 0, model, source: "replay", socket: null, title: "leak.ring", ended: true };
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 140, rows: 40 }} initialScreen="tensors" />);
    await tick();
    const frame = () => plain(ui.lastFrame()!).split("\n");
    const keep = `lines_run.py:${markedAt("keep").split(":").at(-1)} <module>`;
    const header = frame().findIndex((l) => l.includes("SIZE▼"));
    expect(frame()[header]).toMatch(/NAME +ALLOCATED AT/);
    // the ten kept tensors: one row of alike blocks, allocated at the keep line
    expect(frame().find((l) => /^ *10 × +2\.00 MiB /.test(l))).toContain(keep);
    ui.stdin.write("w");
    await tick();
    const row = frame().find((l) => l.includes(keep));
    expect(row).toMatch(/^ *20\.00 MiB .*10 blocks/);
    ui.unmount();
  }, 30_000);
});
