// `a` on the Overview: attach the agent to a PyTorch process started without it, asked first like
// `e`; and the Process screen's line for an attached process (when, where steps count from, what
// the seed brought in from before the attach).
import { expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { createModel } from "../../src/profiler";
import type { Document } from "../../src/system/schema";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { attachedLine } from "../../src/tui/screens/process";
import training from "../fixtures/h100-training.json";
import { settle } from "../support/settle";

const tick = () => settle();
const base = training as unknown as Document;

test("a asks before attaching to the selected process, says no for one that has the agent already", async () => {
  const ctl = new Controller(null, 1000);
  ctl.doc = { ...base, processes: [{ ...base.processes[0]!, agent_pid: null, pytorch: null }] };
  const ui = render(<App ctl={ctl} ascii={true} size={{ columns: 160, rows: 40 }} />);
  await tick();
  ui.stdin.write("a");
  await tick();
  const pid = base.processes[0]!.pid;
  expect(ui.lastFrame()).toContain(`attach the agent to ${pid} python3 (a PyTorch process started without it)? y / n`);
  ui.stdin.write("n");
  await tick();
  expect(ui.lastFrame()).toContain(`pid ${pid} left without the agent`);
  ui.unmount();
  const ctl2 = new Controller(null, 1000);
  ctl2.doc = { ...base, processes: [{ ...base.processes[0]!, agent_pid: pid }] };
  const ui2 = render(<App ctl={ctl2} ascii={true} size={{ columns: 160, rows: 40 }} />);
  await tick();
  ui2.stdin.write("a");
  await tick();
  expect(ui2.lastFrame()).toContain(`a: pid ${pid} already has the agent`);
  ui2.unmount();
});

test("the Process screen's attach line: when, step 0, and what the seed brought in (or why not)", () => {
  const model = createModel();
  const pm = { pid: 7, model, source: "live" as const, socket: null, title: "train.py", ended: false, attachedNs: Date.UTC(2026, 0, 1, 12, 34, 56) * 1e6 };
  expect(attachedLine({ ...pm, attachedNs: null })).toBeNull();
  const at = new Date(pm.attachedNs / 1e6).toTimeString().slice(0, 8);
  expect(attachedLine(pm)).toBe(`attached at ${at}, step 0 = until the first optimizer step after it; no seed: memory from before the attach is unknown`);
  model.seedStatus = { state: "applied", reason: null, blocks: 148, bytes: 3 * 2 ** 30, kept: 2 };
  expect(attachedLine(pm)).toContain("before the attach: 3.00 GiB in 148 blocks");
  model.seedStatus = { state: "refused", reason: "records were lost before its point", blocks: 0, bytes: 0, kept: 0 };
  expect(attachedLine(pm)).toContain("no seed (records were lost before its point)");
});
