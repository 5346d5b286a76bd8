// "Which line of code holds the memory": real PyTorch 2.11 snapshots recorded on an H200 from the
// program's first line with stacks="python" (test/fixtures/snapshots/capture_more.py), so every
// block the user's code made carries the stack that made it. Checked against the facts recorded
// beside them (the kept tensors' and the gradients' own storage addresses and bytes) and against
// the snapshot's own frames, never against the product's output alone.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { atPeak, findings, peakBlockLines } from "../../src/profiler";
import { userFrameLabel } from "../../src/profiler/peak-groups";
import { DEFAULT_USER_FRAME_RULE, frameLabel, type BlockStacks, type Frame } from "../../src/profiler/user-frame";
import { unpickle } from "../../src/snapshot/pickle";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const SCRIPT = readFileSync(join(DIR, "capture_more.py"), "utf8").split("\n");
/** The caching allocator rounds every request up to 512 bytes (kMinBlockSize); a request of at most
 *  1 MiB (kSmallSize) is split off a small segment at exactly that size, never more. */
const SMALL = 1024 * 1024;
const rounded = (bytes: number) => Math.ceil(bytes / 512) * 512;

type RawBlock = { address: number; size: number; state: string; frames?: { filename: string; line: number; name: string }[] };
type RawEntry = { action: string; addr: number; size: number; frames?: { filename: string; line: number; name: string }[] };

const cache = new Map<string, Promise<Awaited<ReturnType<typeof open>>>>();
async function open(name: string) {
  const path = join(DIR, `${name}.pickle.gz`);
  const facts = await Bun.file(join(DIR, `${name}.facts.json`)).json();
  const parsed = await readSnapshotFile(path);
  const { model } = snapshotModel(parsed, { rule: DEFAULT_USER_FRAME_RULE });
  // The snapshot as torch wrote it, read as a plain tree: what the truth is, frames included.
  const tree = unpickle(gunzipSync(readFileSync(path))) as { segments: { blocks: RawBlock[] }[]; device_traces: RawEntry[][] };
  const rawBlocks = new Map<number, RawBlock>();
  for (const s of tree.segments) for (const b of s.blocks) if (b.state === "active_allocated") rawBlocks.set(b.address, b);
  return { path, facts, parsed, model, tree, rawBlocks };
}
const load = (name: string) => cache.get(name) ?? cache.set(name, open(name)).get(name)!;

/** The frame a statement of capture_more.py has in the snapshot: the file as Python spelled it on
 *  the recording machine, the scenario's function, the marked line. */
const lineFrame = (facts: any, mark: string): Frame => ({ file: facts.frames.filename, line: facts.frames.lines[mark], name: facts.frames.function });
const userFrame = (stacks: BlockStacks, stack: number): Frame | null => {
  const k = stack ? stacks.userFrame(stack) : -1;
  return k < 0 ? null : stacks.frames(stack)[k]!;
};

function viewCli(path: string) {
  // the rule for library code is the defaults', whatever the environment running the tests says
  const env = { ...process.env, GPUMEM_TUI_LIBRARY: "", GPUMEM_TUI_USER_CODE: "" };
  const p = Bun.spawnSync(["bun", CLI, "view", path, "--json"], { env, stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.exitCode).toBe(0);
  return JSON.parse(p.stdout.toString());
}

describe("first-line-keep-logits: each step's logits kept in a list", () => {
  test("the kept logits were allocated by the forward's line (104), not by the line that keeps them: each kept block's user frame says so", async () => {
    const { facts, model, rawBlocks } = await load("first-line-keep-logits");
    const forward = lineFrame(facts, "forward");
    // `kept.append(out.logits)` keeps the forward's own tensor (no clone, no copy): its storage is
    // the one lm_head's matmul allocated inside `model(...)`.
    expect(SCRIPT[facts.frames.lines.keep - 1]).toMatch(/^\s*kept\.append\(out\.logits\)\s+# line:keep$/);
    expect(SCRIPT[forward.line - 1]).toMatch(/out = model\(input_ids=x, labels=x\)\s+# line:forward$/);
    const d = model.devices[0]!;
    const { addresses, bytes_each, count } = facts.kept_logits;
    expect(addresses.length).toBe(count);
    for (const address of addresses as number[]) {
      // torch's own frames of the block: the script's forward line is in its stack
      const raw = rawBlocks.get(address)!;
      expect(raw.size).toBe(rounded(bytes_each));
      expect(raw.frames!.some((f) => f.filename === forward.file && f.line === forward.line)).toBe(true);
      // the block's stack as the final segments give it, and as its alloc in the trace gave it
      const fromSegments = userFrame(model.stacks!, model.stacks!.stackOf(0, address));
      const slot = d.blocks.bySlot.get(address)!;
      expect(slot).toBeDefined();
      const fromTrace = userFrame(model.stacks!, d.blocks.stack[slot]!);
      expect({ address, fromSegments, fromTrace }).toEqual({ address, fromSegments: forward, fromTrace: forward });
    }
  });

  test("the growth finding names line 104, and grows by one kept logits a step (1,024,000 bytes: a multiple of 512 at most 1 MiB, so the block is the request)", async () => {
    const { facts, model } = await load("first-line-keep-logits");
    const growth = findings(model).find((f) => f.id === "growth")!;
    expect(growth).toBeDefined();
    const forward = lineFrame(facts, "forward");
    expect(growth.numbers.site_frame).toBe(frameLabel(forward));
    expect(growth.title).toEndWith(`, allocated at ${frameLabel(forward, true)}`);
    // The only thing the loop keeps from a step is its logits: held memory grows by its block,
    // which the allocator rounds to 512 bytes and no further (a small-pool request).
    const { bytes_each } = facts.kept_logits;
    expect(bytes_each).toBeLessThanOrEqual(SMALL);
    for (const perStep of [growth.numbers.growth_per_step_bytes, growth.numbers.category_growth_per_step_bytes] as number[]) {
      expect(perStep).toBeGreaterThanOrEqual(bytes_each);
      expect(perStep).toBeLessThanOrEqual(rounded(bytes_each));
    }
    expect(growth.numbers.last_step).toBe(facts.steps_recorded - 1);
  });

  test("the blocks the growth site counts as still held are the logits kept after the trend's first step, and nothing else", async () => {
    const { facts, model } = await load("first-line-keep-logits");
    const n = findings(model).find((f) => f.id === "growth")!.numbers as Record<string, number>;
    // One logits kept a step, steps 0..last: those of the steps after first_step are what grew.
    // The last step's `out` (its past_key_values and loss) is alive at the dump too, but one step's
    // `out` is alive at every boundary: it does not grow, and is no leak.
    const grew = facts.kept_logits.count - 1 - n.first_step!;
    expect({ site_blocks: n.site_blocks, site_bytes: n.site_bytes }).toEqual({ site_blocks: grew, site_bytes: grew * rounded(facts.kept_logits.bytes_each) });
  });

  test("at the run's peak, grouped by user frame: the groups add up to the peak exactly, and the kept logits are under line 104", async () => {
    const { facts, model } = await load("first-line-keep-logits");
    const v = atPeak(model, { device: 0, which: "run", by: "frame", limit: Infinity })!;
    // recorded from the first line: every block of the peak was seen, none left unaccounted
    expect(v.peak_bytes).toBe(facts.max_memory_allocated);
    expect({ unseen: v.unseen_bytes, partial: v.partial, more: v.more_groups }).toEqual({ unseen: 0, partial: false, more: 0 });
    expect(v.groups.reduce((s, g) => s + g.bytes, 0)).toBe(v.peak_bytes);
    const lines = peakBlockLines(model, { device: 0, which: "run" })!.lines;
    const kept = lines.filter((l) => facts.kept_logits.addresses.includes(l.address));
    // the peak is in the last step: every earlier step's logits is held, and the last one's made
    expect(kept.length).toBe(facts.kept_logits.count);
    for (const l of kept) expect(userFrameLabel(model, l.stack)).toBe(frameLabel(lineFrame(facts, "forward")));
    const g = v.groups.find((x) => x.key === frameLabel(lineFrame(facts, "forward")))!;
    expect(g.bytes).toBeGreaterThanOrEqual(facts.kept_logits.count * rounded(facts.kept_logits.bytes_each));
  });
});

describe("resnet-no-zero-grad: ResNet50 trained without zero_grad", () => {
  test("gradients kept is found", async () => {
    const { model } = await load("resnet-no-zero-grad");
    expect(findings(model).map((f) => f.id)).toContain("gradients_kept");
  });

  test("gradients kept: what it holds is the 161 gradients, all their bytes", async () => {
    const { facts, model, rawBlocks } = await load("resnet-no-zero-grad");
    const f = findings(model).find((x) => x.id === "gradients_kept")!;
    // made in the first backward, added into ever after: all of them are there when each later
    // backward begins; their blocks' sizes as torch's segments give them
    const blocks = (facts.gradients.addresses as number[]).map((a) => rawBlocks.get(a)!.size);
    const bytes = blocks.reduce((s, x) => s + x, 0);
    expect(bytes).toBeGreaterThanOrEqual(facts.gradients.bytes);
    expect({ held_blocks: f.numbers.held_blocks, held_bytes: f.numbers.held_bytes }).toEqual({ held_blocks: facts.gradients.count, held_bytes: bytes });
  });

  test("the snapshot has no frames for the gradients (autograd's engine thread, stacks=\"python\"): no line is made up for them, line 142 made only the backward's seed", async () => {
    const { facts, model, tree, rawBlocks } = await load("resnet-no-zero-grad");
    const grads = new Set<number>(facts.gradients.addresses);
    // torch's own record: neither the final segments nor the allocs of the trace carry a frame
    for (const a of grads) expect(rawBlocks.get(a)!.frames ?? []).toEqual([]);
    const lastAlloc = new Map<number, RawEntry>();
    for (const e of tree.device_traces[0]!) if (e.action === "alloc" && grads.has(e.addr)) lastAlloc.set(e.addr, e);
    expect(lastAlloc.size).toBe(facts.gradients.count);
    for (const e of lastAlloc.values()) expect(e.frames ?? []).toEqual([]);
    // What the backward line did allocate on the Python thread: the seed gradient of the loss
    // (autograd's _make_grads), 4 bytes a step.
    const backward = lineFrame(facts, "backward");
    const at142 = tree.device_traces[0]!.filter((e) => e.action === "alloc" && e.frames?.some((f) => f.filename === backward.file && f.line === backward.line));
    expect(at142.length).toBe(facts.steps_recorded);
    for (const e of at142) expect([e.size, e.frames![0]!.name]).toEqual([4, "_make_grads"]);
    // The product: no stack, no user frame, for any gradient block
    const d = model.devices[0]!;
    for (const a of grads) {
      const slot = d.blocks.bySlot.get(a)!;
      expect({ a, trace: d.blocks.stack[slot], segments: model.stacks!.stackOf(0, a) }).toEqual({ a, trace: 0, segments: 0 });
    }
  });

  test("at the run's peak, grouped by user frame: the groups add up to the peak exactly; the gradients are under where-unknown, not under the backward's line", async () => {
    const { facts, model, rawBlocks } = await load("resnet-no-zero-grad");
    const v = atPeak(model, { device: 0, which: "run", by: "frame", limit: Infinity })!;
    expect(v.peak_bytes).toBe(facts.max_memory_allocated);
    expect({ unseen: v.unseen_bytes, partial: v.partial, more: v.more_groups }).toEqual({ unseen: 0, partial: false, more: 0 });
    expect(v.groups.reduce((s, g) => s + g.bytes, 0)).toBe(v.peak_bytes);
    const grads = new Set<number>(facts.gradients.addresses);
    const lines = peakBlockLines(model, { device: 0, which: "run" })!.lines;
    // the peak is in a step after the first backward: every gradient is alive in it
    const atPeakGrads = lines.filter((l) => grads.has(l.address));
    expect(atPeakGrads.length).toBe(facts.gradients.count);
    for (const l of atPeakGrads) expect(userFrameLabel(model, l.stack)).toBeNull();
    const gradBytes = [...grads].reduce((s, a) => s + rawBlocks.get(a)!.size, 0);
    expect(v.groups.find((g) => g.key === "(where unknown)")!.bytes).toBeGreaterThanOrEqual(gradBytes);
    // the backward's line holds at most the running step's seed (4 bytes, a 512-byte block)
    const backward = v.groups.find((g) => g.key === frameLabel(lineFrame(facts, "backward")));
    expect(backward?.bytes ?? 0).toBeLessThanOrEqual(rounded(4));
    // the momentum buffers: one per parameter, made by opt.step()'s line
    const optimizer = v.groups.find((g) => g.key === frameLabel(lineFrame(facts, "optimizer")))!;
    expect(optimizer.blocks).toBe(facts.parameters.count);
    expect(optimizer.bytes).toBeGreaterThanOrEqual(facts.optimizer_state_bytes);
  });
});

describe("view --json (the CLI) names the user's lines", () => {
  test("first-line-keep-logits: every kept logits among the largest blocks names line 104 in its stack; by user frame, line 104 holds them; the growth finding names it", async () => {
    const { path, facts } = await load("first-line-keep-logits");
    const v = viewCli(path);
    const forward = frameLabel(lineFrame(facts, "forward"));
    for (const address of facts.kept_logits.addresses as number[]) {
      const t = v.top_allocations.find((x: any) => x.address === address);
      expect(t).toBeDefined(); // 1,024,000 bytes: among the ten largest, after two 32 MiB workspaces and a 1 MiB block
      expect(t.user_frame).toBe(forward);
      expect(t.frames[t.user_frame_index]).toBe(forward);
    }
    const groups = v.by_user_frame.filter((g: any) => g.device === 0);
    expect(groups.reduce((s: number, g: any) => s + g.bytes, 0)).toBe(facts.memory_allocated);
    expect(groups.reduce((s: number, g: any) => s + g.blocks, 0)).toBe(facts.allocations);
    expect(groups.find((g: any) => g.user_frame === forward).bytes).toBeGreaterThanOrEqual(facts.kept_logits.count * rounded(facts.kept_logits.bytes_each));
    // the parameters, made by `.to(dev)` after the recording began: the model's line holds them
    expect(groups.find((g: any) => g.user_frame === frameLabel(lineFrame(facts, "model")))).toMatchObject({ blocks: facts.parameters.count, bytes: facts.parameters.bytes });
    expect(v.findings.find((f: any) => f.id === "growth").numbers.site_frame).toBe(forward);
  });

  test("resnet-no-zero-grad: the gradients have no user frame in the JSON, and no group names the backward's line; parameters and momentum under their own lines", async () => {
    const { path, facts } = await load("resnet-no-zero-grad");
    const v = viewCli(path);
    const grads = new Set<number>(facts.gradients.addresses);
    const listed = v.top_allocations.filter((t: any) => grads.has(t.address));
    expect(listed.length).toBeGreaterThan(0); // layer4's 3x3 convolutions: 9 MiB gradients
    for (const t of listed) expect(t).toMatchObject({ frames: [], frames_total: 0, user_frame: null, user_frame_index: null });
    const groups = v.by_user_frame.filter((g: any) => g.device === 0);
    expect(groups.reduce((s: number, g: any) => s + g.bytes, 0)).toBe(facts.memory_allocated);
    expect(groups.reduce((s: number, g: any) => s + g.blocks, 0)).toBe(facts.allocations);
    const none = groups.find((g: any) => g.user_frame === null);
    expect(none.blocks).toBeGreaterThanOrEqual(facts.gradients.count);
    expect(none.bytes).toBeGreaterThanOrEqual(facts.gradients.bytes);
    // the seed gradient was freed: nothing alive at the end was made by the backward's line
    expect(groups.find((g: any) => g.user_frame === frameLabel(lineFrame(facts, "backward")))).toBeUndefined();
    const momentum = groups.find((g: any) => g.user_frame === frameLabel(lineFrame(facts, "optimizer")));
    expect(momentum.blocks).toBe(facts.parameters.count);
    expect(momentum.bytes).toBeGreaterThanOrEqual(facts.optimizer_state_bytes);
    // parameters and BatchNorm's buffers (running mean, variance, batches tracked) from `.to(dev)`
    expect(groups.find((g: any) => g.user_frame === frameLabel(lineFrame(facts, "model"))).bytes).toBeGreaterThanOrEqual(facts.parameters.bytes);
  });
});
