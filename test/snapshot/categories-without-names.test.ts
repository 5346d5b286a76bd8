// Categories from what the allocator saw, where no names came (issue 36, item 4): a snapshot
// recorded from the program's first line with stacks="python" (frames, but no names), and the
// same program's trace as the live path takes it (phases marked, no frames). Parameters are what
// was made before the first forward, alive through every step, and sized as a gradient or
// optimizer state; an input batch made once before the loop is none of these: input. Gradients
// kept across steps (no zero_grad) raise "gradients kept". The same code gets the same label with
// and without zero_grad. And the committed resnet-no-zero-grad recording stays right.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { blocks, categories, createModel, findings, type ProfilerModel } from "../../src/profiler";
import { pickle } from "../../src/snapshot/pickle-write";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel, viewJson } from "../../src/snapshot/view";
import { readAll, snapshotReplayOf } from "../../src/snapshot/trace-source";
import { userFrameRuleFromEnv } from "../../src/snapshot/block-stacks";
import { categoriesByLine } from "../support/categories-by-line";
import { LINES, PROGRAM, trainingSnapshot, type Program, type ProgramFacts } from "./synthetic-training";

const WORK = mkdtempSync(join(tmpdir(), "categories-without-names-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));
const FIXTURES = join(import.meta.dir, "..", "fixtures", "snapshots");
let written = 0;

/** The program's snapshot as a file, replayed as `view` replays it. */
async function recorded(p: Program): Promise<{ model: ProfilerModel; facts: ProgramFacts; path: string }> {
  const { snapshot, facts } = trainingSnapshot(p);
  const path = join(WORK, `${++written}-zero-grad-${p.zeroGrad}.pickle`);
  writeFileSync(path, pickle(snapshot), { flag: "wx", mode: 0o600 });
  const parsed = await readSnapshotFile(path);
  return { model: snapshotModel(parsed, { rule: userFrameRuleFromEnv({}) }).model, facts, path };
}

const bytesOf = (m: ProfilerModel, category: string) => categories(m).categories.find((c) => c.category === category)!;
const ids = (m: ProfilerModel) => findings(m).map((f) => f.id);

describe("a snapshot recorded from the first line, stacks=python, no names", () => {
  test("zero_grad never called: weights are parameters, the kept gradients gradients, the input input; gradients kept is raised", async () => {
    const { model, facts } = await recorded({ zeroGrad: false });
    expect(bytesOf(model, "parameter")).toMatchObject({ bytes: facts.parameters.bytes, blocks: facts.parameters.blocks });
    expect(bytesOf(model, "gradient")).toMatchObject({ bytes: facts.gradients.bytes, blocks: facts.gradients.blocks });
    expect(bytesOf(model, "optimizer_state")).toMatchObject({ bytes: facts.optimizer_state.bytes, blocks: facts.optimizer_state.blocks });
    expect(bytesOf(model, "input")).toMatchObject({ bytes: facts.input.bytes, blocks: facts.input.blocks });
    // cuBLAS's workspaces (the forward's thread and autograd's), made on first use and kept
    expect(bytesOf(model, "other")).toMatchObject({ bytes: facts.workspaces.bytes, blocks: facts.workspaces.blocks });
    expect(ids(model)).toContain("gradients_kept");
    const f = findings(model).find((x) => x.id === "gradients_kept")!;
    expect(f.numbers.held_bytes).toBe(facts.gradients.bytes);
  });

  test("with zero_grad: the input batch made before the loop is input, not a parameter; no gradients kept", async () => {
    const { model, facts } = await recorded({ zeroGrad: true });
    expect(bytesOf(model, "parameter")).toMatchObject({ bytes: facts.parameters.bytes, blocks: facts.parameters.blocks });
    expect(bytesOf(model, "input")).toMatchObject({ bytes: facts.input.bytes, blocks: facts.input.blocks });
    expect(bytesOf(model, "gradient").bytes).toBe(0);
    expect(ids(model)).not.toContain("gradients_kept");
  });

  test("the same code gets the same label in both runs: the .cuda() line parameter, the randn line input, AdamW's line optimizer state", async () => {
    const without = categoriesByLine((await recorded({ zeroGrad: false })).model, PROGRAM);
    const twin = categoriesByLine((await recorded({ zeroGrad: true })).model, PROGRAM);
    for (const byLine of [without, twin]) {
      expect([...byLine.get(LINES.model)!]).toEqual(["parameter"]);
      expect([...byLine.get(LINES.input)!]).toEqual(["input"]);
      expect([...byLine.get(LINES.target)!]).toEqual(["input"]);
      expect([...byLine.get(LINES.optimizer)!]).toEqual(["optimizer_state"]);
    }
    for (const [line, cats] of twin) if (without.has(line)) expect([...without.get(line)!]).toEqual([...cats]);
  });

  test("view --json says the same: categories and the finding", async () => {
    const { path, facts } = await recorded({ zeroGrad: false, steps: 5 });
    const v = await viewJson(path, undefined, userFrameRuleFromEnv({}));
    const c = v.categories[0]!.categories;
    expect(c.find((x) => x.category === "parameter")!.bytes).toBe(facts.parameters.bytes);
    expect(c.find((x) => x.category === "gradient")!.bytes).toBe(facts.gradients.bytes);
    expect(c.find((x) => x.category === "input")!.bytes).toBe(facts.input.bytes);
    expect(v.findings.map((f) => f.id)).toContain("gradients_kept");
  });
});

describe("the same program as the live path takes it: phases, no frames", () => {
  // The live ring and a replayed snapshot feed one model (device.ts → lifetimes.ts): this is the
  // trace without any frame, its phases from the ranges alone, fed to a fresh model as records.
  function live(p: Program) {
    const { snapshot, facts } = trainingSnapshot({ ...p, frames: false });
    const r = snapshotReplayOf(snapshot as Parameters<typeof snapshotReplayOf>[0]);
    const m = createModel();
    m.setRanges(r.ranges);
    m.ingest(readAll(r));
    return { m, facts };
  }

  test("without zero_grad: gradients kept, the parameters and the input told apart", () => {
    const { m, facts } = live({ zeroGrad: false });
    expect(ids(m)).toContain("gradients_kept");
    expect(bytesOf(m, "gradient").bytes).toBe(facts.gradients.bytes);
    expect(bytesOf(m, "parameter").bytes).toBe(facts.parameters.bytes);
    expect(bytesOf(m, "input").bytes).toBe(facts.input.bytes);
  });

  test("with zero_grad: no finding, the input is input", () => {
    const { m, facts } = live({ zeroGrad: true });
    expect(ids(m)).not.toContain("gradients_kept");
    expect(bytesOf(m, "input").bytes).toBe(facts.input.bytes);
    expect(bytesOf(m, "parameter").bytes).toBe(facts.parameters.bytes);
  });
});

describe("recorded on an H200 from the first line (test/fixtures/snapshots)", () => {
  test("resnet-no-zero-grad stays right: every .grad torch listed is a gradient, gradients kept raised, no input among the parameters", async () => {
    const facts = await Bun.file(join(FIXTURES, "resnet-no-zero-grad.facts.json")).json();
    const { model } = snapshotModel(await readSnapshotFile(join(FIXTURES, "resnet-no-zero-grad.pickle.gz")), { rule: userFrameRuleFromEnv({}) });
    const byAddress = new Map(blocks(model, { limit: 1e6 }).blocks.map((b) => [b.address, b.category]));
    const grads: number[] = facts.gradients.addresses;
    expect(grads.length).toBe(facts.gradients.count);
    expect(grads.every((a) => byAddress.get(a) === "gradient")).toBe(true);
    expect(bytesOf(model, "gradient").blocks).toBe(facts.gradients.count);
    expect(ids(model)).toContain("gradients_kept");
    // The batch is made each step (record_function "data"), after the model: no block made before
    // the first forward is left over as input.
    expect(bytesOf(model, "parameter").blocks).toBeGreaterThanOrEqual(facts.parameters.count);
  });
});
