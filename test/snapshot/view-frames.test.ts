// `view --json`: where memory was allocated, on real snapshots taken on an H100 (test/fixtures/
// snapshots, recorded by capture_snapshots.py). Each top allocation carries its whole stack and the
// line of the script that allocated it; the allocated bytes summed by user frame are torch's own
// memory_allocated; the rule for library code is the user's to extend. And gradients found by
// their frames where the names of the agent are not there.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { unpickle } from "../../src/snapshot/pickle";
import { pickle, type PickleData } from "../../src/snapshot/pickle-write";
import { userFrameRuleFromEnv } from "../../src/snapshot/block-stacks";
import { viewJson, type SnapshotView } from "../../src/snapshot/view";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const WORK = mkdtempSync(join(tmpdir(), "view-frames-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
const lineOf = (code: string) => SCRIPT.findIndex((l) => l.includes(code)) + 1;
/** GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128): 541,184 fp32 parameters. */
const PARAMETER_BYTES = 541_184 * 4;
/** The logits the leak run keeps each step: 4 × 64 × 1000 fp32. */
const LOGITS = 4 * 64 * 1000 * 4;

const cache = new Map<string, Promise<{ v: SnapshotView; facts: Record<string, any> }>>();
function load(name: string) {
  if (!cache.has(name)) cache.set(name, (async () => ({ v: await viewJson(join(DIR, `${name}.pickle.gz`), undefined, userFrameRuleFromEnv({})), facts: await Bun.file(join(DIR, `${name}.facts.json`)).json() }))());
  return cache.get(name)!;
}

describe("where memory was allocated, in view --json", () => {
  test("leak: each step's kept logits were allocated at `out = model(...)`; the JSON has the whole stack down to that line", async () => {
    const { v } = await load("leak");
    const logits = v.top_allocations.filter((t) => t.size_bytes === LOGITS);
    expect(logits.length).toBeGreaterThanOrEqual(5); // six steps kept theirs; the top ten list them
    for (const t of logits) {
      expect(t.user_frame).toEndWith(`/capture_snapshots.py:${lineOf("out = model(input_ids=x, labels=x)")} step`);
      expect(t.frames[t.user_frame_index!]).toBe(t.user_frame!);
      // the innermost frame is torch's own Linear (the lm_head), not three library frames and no more
      expect(t.frames[0]).toMatch(/torch\/nn\/modules\/linear\.py:\d+ forward$/);
      expect(t.frames.length).toBeGreaterThan(t.user_frame_index!);
      expect(t.frames_total).toBe(t.frames.length);
    }
  });

  test("leak: the growth finding names the line that allocated what grows, in its title, its evidence and its numbers", async () => {
    const { v } = await load("leak");
    const growth = v.findings.find((f) => f.id === "growth")!;
    const line = `capture_snapshots.py:${lineOf("out = model(input_ids=x, labels=x)")} step`;
    expect(growth.title).toEndWith(`, allocated at ${line}`);
    expect(growth.evidence).toContain(`were allocated in forward, in range train_step, at `);
    expect(String(growth.numbers.site_frame)).toEndWith(`/${line}`);
    // What grows is the kept logits, one block a step (all but the first step's, which the
    // boundary the trend starts from already held).
    expect(growth.numbers.site_bytes).toBe(LOGITS * Number(growth.numbers.site_blocks));
  });

  test("stacks-all: the C++ frames torch records first are counted, not listed; the user frame is still the script's line", async () => {
    const { v } = await load("stacks-all");
    const state = v.top_allocations.filter((t) => t.user_frame?.endsWith(`:${lineOf("opt.step()")} step`));
    expect(state.length).toBeGreaterThan(0); // AdamW's state, made in the first opt.step()
    for (const t of v.top_allocations) {
      if (t.frames.some((f) => f.includes(".py:"))) expect(t.frames.every((f) => /\.py:\d+ /.test(f))).toBe(true);
      expect(t.frames_total).toBeGreaterThanOrEqual(t.frames.length);
    }
    expect(state.every((t) => t.frames_total > t.frames.length)).toBe(true);
  });

  for (const name of ["midrun", "stacks-python", "stacks-all", "no-zero-grad", "oom", "leak"]) {
    test(`${name}: allocated bytes by user frame add up to torch's memory_allocated, blocks to its allocations`, async () => {
      const { v, facts } = await load(name);
      const groups = v.by_user_frame.filter((g) => g.device === 0);
      expect(groups.reduce((s, g) => s + g.bytes, 0)).toBe(facts.memory_allocated);
      expect(groups.reduce((s, g) => s + g.blocks, 0)).toBe(facts.allocations);
      for (let i = 1; i < groups.length; i++) expect(groups[i - 1]!.bytes).toBeGreaterThanOrEqual(groups[i]!.bytes);
    });
  }

  test("leak by user frame: the forward's line holds the kept logits; blocks from before the recording have no frames", async () => {
    const { v } = await load("leak");
    const forward = v.by_user_frame.find((g) => g.user_frame?.endsWith(`:${lineOf("out = model(input_ids=x, labels=x)")} step`))!;
    expect(forward.bytes).toBeGreaterThanOrEqual(6 * LOGITS);
    const none = v.by_user_frame.find((g) => g.user_frame === null)!;
    // the parameters, moved to the GPU before the recording began
    expect(none.bytes).toBeGreaterThanOrEqual(PARAMETER_BYTES);
  });

  test("GPUMEM_TUI_USER_CODE and GPUMEM_TUI_LIBRARY: the rule is the user's to extend; a bad entry is said before the file is read", async () => {
    const rule = userFrameRuleFromEnv({ GPUMEM_TUI_USER_CODE: "transformers", GPUMEM_TUI_LIBRARY: "" });
    const v = await viewJson(join(DIR, "leak.pickle.gz"), undefined, rule);
    for (const t of v.top_allocations.filter((t) => t.size_bytes === LOGITS)) expect(t.user_frame).toContain("/site-packages/transformers/");
    const p = Bun.spawnSync(["bun", CLI, "view", join(DIR, "leak.pickle.gz"), "--json"], { env: { ...process.env, GPUMEM_TUI_LIBRARY: "my lib" }, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).not.toBe(0);
    expect(p.stdout.toString()).toBe("");
    expect(p.stderr.toString()).toContain('GPUMEM_TUI_LIBRARY: "my lib" is neither a path prefix');
  });
});

describe("gradients known without names", () => {
  test("no-zero-grad: zero_grad never called, the gradients held from the first backward: gradients kept; none of the sound runs", async () => {
    const ids = async (name: string) => (await load(name)).v.findings.map((f) => f.id);
    expect(await ids("no-zero-grad")).toContain("gradients_kept");
    for (const name of ["midrun", "expandable", "stacks-all", "stacks-python", "oom", "leak"]) expect(await ids(name)).not.toContain("gradients_kept");
    const { v } = await load("no-zero-grad");
    expect(v.categories[0]!.categories.find((c) => c.category === "gradient")!.bytes).toBe(PARAMETER_BYTES);
  });

  test("a recording whose ring lost that first backward: the gradients are told by autograd's frames in the segments", async () => {
    // no-zero-grad as a smaller max_entries would have kept it: from the second recorded step on.
    // The gradients (allocated in the first recorded backward, held to the end) are then memory from
    // before the recording; their frames are those autograd's engine thread has under stacks="all".
    const tree = unpickle(gunzipSync(readFileSync(join(DIR, "no-zero-grad.pickle.gz")))) as any;
    const all = unpickle(gunzipSync(readFileSync(join(DIR, "stacks-all.pickle.gz")))) as any;
    const engine = all.device_traces[0].find((e: any) => e.action === "alloc" && e.frames?.some((f: any) => f.name.includes("Engine::thread_main"))).frames;
    const cut = tree.external_annotations.filter((a: any) => a.name === "data" && a.stage === "START")[1].time_us;
    const early = new Set(tree.device_traces[0].filter((e: any) => e.action === "alloc" && e.time_us < cut).map((e: any) => e.addr));
    let grads = 0;
    for (const s of tree.segments)
      for (const b of s.blocks)
        if (b.state === "active_allocated" && early.has(b.address)) {
          b.frames = engine;
          grads += b.size;
        }
    expect(grads).toBe(PARAMETER_BYTES);
    tree.device_traces[0] = tree.device_traces[0].filter((e: any) => e.time_us >= cut);
    tree.external_annotations = tree.external_annotations.filter((a: any) => a.time_us >= cut);
    const path = join(WORK, "no-zero-grad-cut.pickle");
    writeFileSync(path, pickle(tree as PickleData));
    const v = await viewJson(path, undefined, userFrameRuleFromEnv({}));
    expect(v.before_recording[0]!.blocks).toBe(115);
    expect(v.categories[0]!.categories.find((c) => c.category === "gradient")!.bytes).toBe(PARAMETER_BYTES);
    const f = v.findings.find((x) => x.id === "gradients_kept")!;
    expect(f.numbers.held_bytes).toBe(PARAMETER_BYTES);
  });
});
