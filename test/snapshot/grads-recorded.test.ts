// Issue 36's program recorded on an H200 the way PyTorch's docs say, from its first line
// (test/fixtures/snapshots/capture_grads.py: _record_memory_history(max_entries=100000,
// stacks="python") before the model exists; 8 residual blocks and a Linear, AdamW, input
// 64×64×512, ranges "## forward ##", "## backward ##", "## optimizer ##", four steps), once without
// zero_grad (grads-kept) and once with it (grads-zero-grad), and torch's own facts of each run
// (.facts.json: every parameter's and kept gradient's address, the input's). No names come: the
// categories are what the allocator saw. Held to torch's addresses block by block, as `view`
// replays it (--json, and the screens' replay that takes in the final segments), and as the live
// path takes the same records (no frames: phases from the marks alone).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { newEventBatch, type EventBatch } from "../../src/ffi/events";
import { blocks, categories, createModel, findings, segments, type NamedTensor, type ProfilerModel } from "../../src/profiler";
import { HINT_NO_FRAMES } from "../../src/snapshot/frames";
import { readSnapshotFile, type ParsedSnapshot } from "../../src/snapshot/read";
import { readAll } from "../../src/snapshot/trace-source";
import { replayOf, snapshotModel, viewJson } from "../../src/snapshot/view";
import { userFrameRuleFromEnv } from "../../src/snapshot/block-stacks";
import { categoriesByLine } from "../support/categories-by-line";

const SNAPS = join(import.meta.dir, "..", "fixtures", "snapshots");
const RUNS = ["grads-kept", "grads-zero-grad"] as const;
type Run = (typeof RUNS)[number];

interface Facts {
  zero_grad_called: boolean;
  memory_allocated: number;
  frames: { filename: string; lines: { model: number; data: number; optimizer: number } };
  parameters: { count: number; bytes: number; addresses: number[] };
  gradients_kept: { count: number; bytes: number; addresses: number[] };
  input: { address: number; bytes: number };
}

const facts = (run: Run): Promise<Facts> => Bun.file(join(SNAPS, `${run}.facts.json`)).json();
const parsed = (run: Run): Promise<ParsedSnapshot> => readSnapshotFile(join(SNAPS, `${run}.pickle.gz`));
/** The library rule without the environment's: the test is the same wherever it runs. */
const RULE = userFrameRuleFromEnv({});

/** The model `view --json` plays (resync false) or the screens' (the final segments taken in). */
async function viewed(run: Run, resync: boolean): Promise<ProfilerModel> {
  return snapshotModel(await parsed(run), { rule: RULE, resync }).model;
}

/** The run's records as the live ring has them: no frames, so no frame hints and no stacks; the
 *  phases come from the marks (here the ranges) alone. */
async function liveRecords(run: Run): Promise<{ records: EventBatch; ranges: Record<string, string> }> {
  const p = await parsed(run);
  p.trace.hint.fill(HINT_NO_FRAMES);
  p.trace.stack.fill(0);
  const r = replayOf(p);
  return { records: readAll(r), ranges: r.ranges };
}

/** The live path from the program's start (`run`): every record fed to a fresh model. */
async function liveModel(run: Run): Promise<ProfilerModel> {
  const { records, ranges } = await liveRecords(run);
  const m = createModel();
  m.setRanges(ranges);
  m.ingest(records);
  return m;
}

/** Records [from, to) of a batch, as a batch of their own (a reader's later read). */
function records(b: EventBatch, from: number, to: number): EventBatch {
  const out = newEventBatch(to - from);
  for (const k of Object.keys(out) as (keyof EventBatch)[]) if (k !== "count") (out[k] as Float64Array).set((b[k] as Float64Array).subarray(from, to));
  out.count = to - from;
  return out;
}

/** The first record of step `step` (the end of the optimizer step before it). */
function stepStart(b: EventBatch, step: number): number {
  let i = 0;
  while (i < b.count && b.step[i]! < step) i++;
  return i;
}

/**
 * The live path of an attach after the first step: the ring begins there, and the agent's seed
 * (torch's memory_snapshot() at that point: every segment and live block) comes first. The seed's
 * state is the allocator's there, read off a model fed the records before it. `named`: at the end
 * of the next optimizer step the agent's names (`names` at_step) come, as the monitor asks for
 * them after the first optimizer step: the model's parameters and their .grad where torch had them.
 */
async function attachedModel(run: Run, named: (sizeOf: Map<number, number>) => NamedTensor[]): Promise<ProfilerModel> {
  const { records: all, ranges } = await liveRecords(run);
  const at = stepStart(all, 1);
  const before = createModel();
  before.ingest(records(all, 0, at));
  const segs = segments(before, { withBlocks: true }).segments.map((s) => ({
    address: s.address,
    total_size: s.size_bytes,
    stream: s.stream,
    blocks: (s.blocks ?? []).map((b) => ({ address: b.address, size: b.size_bytes, state: "active_allocated" })),
  }));
  const m = createModel();
  m.setRanges(ranges);
  m.setSeed({ version: 1, unix_ns: all.time_us[at]! * 1000, devices: [{ device: 0, events: 0, segments: segs }] });
  const namesAt = stepStart(all, 2);
  m.ingest(records(all, at, namesAt));
  const sizeOf = new Map(blocks(m, { limit: 1e6 }).blocks.map((b) => [b.address, b.size_bytes]));
  const r = m.setNames(named(sizeOf));
  expect(r.unknown).toBe(0);
  m.ingest(records(all, namesAt, all.count));
  expect(m.seedStatus?.state).toBe("applied");
  return m;
}

/** Each live block's category by its address. */
const categoryByAddress = (m: ProfilerModel) => new Map(blocks(m, { limit: 1e6 }).blocks.map((b) => [b.address, b.category]));
const total = (m: ProfilerModel, category: string) => categories(m).categories.find((c) => c.category === category)!;
const ids = (m: ProfilerModel) => findings(m).map((f) => f.id);
const sorted = (xs: Iterable<number>) => [...xs].sort((a, b) => a - b);

/** Torch's own block sizes and requests at `addresses`, from the snapshot's final segments. */
function segmentBlocks(p: ParsedSnapshot, addresses: number[]): { size: number; requested: number; n: number } {
  const want = new Set(addresses);
  let size = 0;
  let requested = 0;
  let n = 0;
  for (const seg of p.root.segments as unknown as { blocks: { address: number; size: number; requested_size: number; state: string }[] }[])
    for (const b of seg.blocks)
      if (want.has(b.address) && b.state === "active_allocated") {
        size += b.size;
        requested += b.requested_size;
        n++;
      }
  return { size, requested, n };
}

describe("issue 36's program recorded from its first line on an H200, no names", () => {
  for (const resync of [false, true]) {
    const as = resync ? "as the screens replay it" : "as view --json replays it";
    for (const run of RUNS) {
      test(`${run}, ${as}: the weights made at .cuda() are parameters, torch's every parameter and only them, in its bytes`, async () => {
        const [f, p] = await Promise.all([facts(run), parsed(run)]);
        const m = snapshotModel(p, { rule: RULE, resync }).model;
        const cat = categoryByAddress(m);
        expect(f.parameters.addresses.length).toBe(f.parameters.count);
        expect(f.parameters.addresses.filter((a) => cat.get(a) !== "parameter")).toEqual([]);
        const mine = sorted([...cat].filter(([, c]) => c === "parameter").map(([a]) => a));
        expect(mine).toEqual(sorted(f.parameters.addresses));
        // torch's bytes: the blocks' requests are the parameters' bytes, the blocks' sizes what is counted
        const torch = segmentBlocks(p, f.parameters.addresses);
        expect(torch).toMatchObject({ requested: f.parameters.bytes, n: f.parameters.count });
        expect(total(m, "parameter")).toMatchObject({ bytes: torch.size, blocks: f.parameters.count });
        // the input batch (x = torch.randn(...) after the model) is input, never a parameter
        expect(cat.get(f.input.address)).toBe("input");
        expect(total(m, "input")).toMatchObject({ bytes: f.input.bytes, blocks: 1 });
        // and the whole live memory is torch's at the end
        expect(categories(m).total_bytes).toBe(f.memory_allocated);
      });
    }

    test(`${as}: without zero_grad every .grad torch kept is a gradient and "gradients kept" is raised with their bytes; with it neither`, async () => {
      const [kept, keptFacts] = await Promise.all([viewed("grads-kept", resync), facts("grads-kept")]);
      expect(keptFacts.zero_grad_called).toBe(false);
      expect(keptFacts.gradients_kept.count).toBe(keptFacts.parameters.count);
      const cat = categoryByAddress(kept);
      const grads = sorted([...cat].filter(([, c]) => c === "gradient").map(([a]) => a));
      expect(grads).toEqual(sorted(keptFacts.gradients_kept.addresses));
      const g = total(kept, "gradient");
      expect(g.blocks).toBe(keptFacts.gradients_kept.count);
      expect(g.bytes).toBe(segmentBlocks(await parsed("grads-kept"), keptFacts.gradients_kept.addresses).size);
      expect(ids(kept)).toContain("gradients_kept");
      const finding = findings(kept).find((x) => x.id === "gradients_kept")!;
      expect(finding.numbers).toMatchObject({ held_bytes: g.bytes, held_blocks: keptFacts.gradients_kept.count, steps_with_held_gradients: 3, steps_with_backward: 3 });

      const [twin, twinFacts] = await Promise.all([viewed("grads-zero-grad", resync), facts("grads-zero-grad")]);
      expect(twinFacts.zero_grad_called).toBe(true);
      expect(twinFacts.gradients_kept.count).toBe(0);
      expect(total(twin, "gradient").bytes).toBe(0);
      expect(ids(twin)).not.toContain("gradients_kept");
    });
  }

  test("the same code gets the same label in both runs: .cuda() parameter, the randn input, AdamW's step optimizer state", async () => {
    const f = await facts("grads-kept");
    const { lines, filename } = f.frames;
    const [kept, twin] = await Promise.all(RUNS.map(async (run) => categoriesByLine(await viewed(run, true), filename)));
    for (const byLine of [kept!, twin!]) {
      expect(byLine.get(lines.model)).toEqual(["parameter"]);
      expect(byLine.get(lines.data)).toEqual(["input"]);
      expect(byLine.get(lines.optimizer)).toEqual(["optimizer_state"]);
    }
    // every line with live blocks in both runs has one and the same set of labels in both
    const common = [...kept!.keys()].filter((line) => twin!.has(line));
    expect(common.length).toBeGreaterThanOrEqual(3);
    for (const line of common) expect([line, kept!.get(line)]).toEqual([line, twin!.get(line)]);
  });

  test("view --json says it: parameter and gradient bytes, the input, the finding on grads-kept only", async () => {
    for (const run of RUNS) {
      const f = await facts(run);
      const v = await viewJson(join(SNAPS, `${run}.pickle.gz`), undefined, RULE);
      const c = new Map(v.categories[0]!.categories.map((x) => [x.category, x]));
      expect(c.get("parameter")).toMatchObject({ blocks: f.parameters.count, bytes: segmentBlocks(await parsed(run), f.parameters.addresses).size });
      expect(c.get("gradient")!.blocks).toBe(f.gradients_kept.count);
      expect(c.get("input")).toMatchObject({ blocks: 1, bytes: f.input.bytes });
      expect(v.findings.some((x) => x.id === "gradients_kept")).toBe(!f.zero_grad_called);
    }
  });
});

describe("the same records as the live path takes them (no frames, phases from the marks)", () => {
  for (const run of RUNS) {
    test(`${run}: parameters, gradients and the input by torch's addresses; "gradients kept" exactly where zero_grad is missing`, async () => {
      const [f, m] = await Promise.all([facts(run), liveModel(run)]);
      const cat = categoryByAddress(m);
      expect(sorted([...cat].filter(([, c]) => c === "parameter").map(([a]) => a))).toEqual(sorted(f.parameters.addresses));
      expect(sorted([...cat].filter(([, c]) => c === "gradient").map(([a]) => a))).toEqual(sorted(f.gradients_kept.addresses));
      expect(cat.get(f.input.address)).toBe("input");
      expect(ids(m).includes("gradients_kept")).toBe(!f.zero_grad_called);
    });
  }
});

describe("the same program attached live after its first step (a seed, then the ring)", () => {
  const tensors = (f: Facts, sizeOf: Map<number, number>): NamedTensor[] => [
    ...f.parameters.addresses.map((address, i) => ({ address, size: sizeOf.get(address)!, device: 0, name: `p${i}`, category: "parameter" })),
    ...f.gradients_kept.addresses.map((address, i) => ({ address, size: sizeOf.get(address)!, device: 0, name: `p${i}.grad`, category: "gradient" })),
  ];

  test("with the agent's names: grads-kept raises \"gradients kept\" with torch's gradients, the twin does not", async () => {
    const kept = await facts("grads-kept");
    const m = await attachedModel("grads-kept", (sizeOf) => tensors(kept, sizeOf));
    const g = findings(m).find((x) => x.id === "gradients_kept");
    expect(g?.numbers.held_blocks).toBe(kept.gradients_kept.count);
    expect(g?.numbers.held_bytes).toBe(total(m, "gradient").bytes);
    const twin = await facts("grads-zero-grad");
    expect(ids(await attachedModel("grads-zero-grad", (sizeOf) => tensors(twin, sizeOf)))).not.toContain("gradients_kept");
  });

  test("without names, the twin that zeroes its gradients is not warned of kept ones", async () => {
    // Its gradients are freed by zero_grad every step: what a .grad held before the attach left
    // behind must not read as gradients kept.
    expect(ids(await attachedModel("grads-zero-grad", () => []))).not.toContain("gradients_kept");
  });
});
