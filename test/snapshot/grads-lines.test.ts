// Issue 37, on real recordings: gradients kept across steps name the line that calls backward and
// the line that calls the optimizer's step; memory that grows, the line that made what stays. torch's own snapshots (history on) of programs that
// never call zero_grad: issue 36's residual MLP and a torchvision ResNet50 on an H200, a GPT-2 on an
// H100 (test/fixtures/snapshots: grads-kept, resnet-no-zero-grad, no-zero-grad). The gradients come
// from autograd's engine (no frames): the lines come from the phases' own allocations on the
// calling thread (the loss's gradient, the optimizer's state), checked against the marks the
// capture scripts left in their source (facts.frames.lines) or the source itself.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");

function findingLines(name: string, id: string): [string, string][] {
  const p = Bun.spawnSync(["bun", CLI, "view", join(DIR, `${name}.pickle.gz`), "--json"], { stdout: "pipe", stderr: "pipe" });
  expect(p.exitCode).toBe(0);
  const f = JSON.parse(p.stdout.toString()).findings.find((x: { id: string }) => x.id === id);
  return (f?.lines ?? []).map((l: { role: string; at: string }) => [l.role, l.at.replace(/^.*\//, "").replace(/ .*$/, "")]);
}
const gradientsLines = (name: string) => findingLines(name, "gradients_kept");

/** "file.py:N" of a marked line of a capture script (its facts' frames). */
function marked(name: string, mark: string): string {
  const fr = JSON.parse(readFileSync(join(DIR, `${name}.facts.json`), "utf8")).frames;
  return `${fr.filename.replace(/^.*\//, "")}:${fr.lines[mark]}`;
}

describe("gradients kept: backward's line and the optimizer's, from torch's own snapshots", () => {
  for (const name of ["grads-kept", "resnet-no-zero-grad"])
    test(`${name}: line:backward and line:optimizer of its capture script`, () => {
      expect(gradientsLines(name)).toEqual([
        ["backward", marked(name, "backward")],
        ["optimizer", marked(name, "optimizer")],
      ]);
    });

  test("no-zero-grad (GPT-2 on an H100): out.loss.backward() and opt.step() of capture_snapshots.py", () => {
    const src = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
    const at = (code: string) => `capture_snapshots.py:${src.findIndex((l) => l.includes(code)) + 1}`;
    expect(gradientsLines("no-zero-grad")).toEqual([
      ["backward", at("out.loss.backward()")],
      ["optimizer", at("opt.step()")],
    ]);
  });
});

describe("growth: the line that made the memory that stays, from torch's own snapshots", () => {
  test("first-line-keep-logits (a GPT-2 on an H200 keeping its logits, recorded from its first line): line:forward, where the logits are made", () => {
    expect(findingLines("first-line-keep-logits", "growth")).toEqual([["grows", marked("first-line-keep-logits", "forward")]]);
  });

  test("leak (a GPT-2 on an H100 keeping its logits): the model's call in capture_snapshots.py", () => {
    const src = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
    expect(findingLines("leak", "growth")).toEqual([["grows", `capture_snapshots.py:${src.findIndex((l) => l.includes("out = model(input_ids=x, labels=x)")) + 1}`]]);
  });
});
