// Real PyTorch 2.11 snapshots taken on an H100 (test/fixtures/snapshots, made by
// test/fixtures/snapshots/capture_snapshots.py: a small transformers GPT-2, AdamW), each with
// torch's own figures at dump time in NAME.facts.json. The replay starts from the memory that
// existed before the recording and must end exactly on torch's memory_allocated, active bytes and
// memory_reserved; `view --json` must count blocks as torch does; the findings must be the ones
// each run earned.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { formatBytes } from "../../src/words";
import { viewJson, type SnapshotView } from "../../src/snapshot/view";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const NAMES = ["midrun", "expandable", "stacks-all", "stacks-python", "no-zero-grad", "oom", "leak"] as const;
/** GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=128): 541,184 fp32 parameters. */
const PARAMETER_BYTES = 541_184 * 4;

const cache = new Map<string, Promise<{ v: SnapshotView; facts: Record<string, any> }>>();
function load(name: string) {
  if (!cache.has(name))
    cache.set(name, (async () => ({ v: await viewJson(join(DIR, `${name}.pickle.gz`)), facts: await Bun.file(join(DIR, `${name}.facts.json`)).json() }))());
  return cache.get(name)!;
}
const cat = (v: SnapshotView, name: string) => v.categories[0]!.categories.find((c) => c.category === name)!.bytes;

describe("snapshots taken on an H100, against torch's figures at dump time", () => {
  for (const name of NAMES) {
    test(`${name}: the replay ends on torch's allocated, active and reserved; view counts blocks as torch does`, async () => {
      const { v, facts } = await load(name);
      const r = v.replay.devices[0]!;
      expect(r.allocated_bytes).toBe(facts.memory_allocated);
      expect(r.active_bytes).toBe(facts.active_bytes);
      expect(r.reserved_bytes).toBe(facts.memory_reserved);
      expect(r.steps).toBe(facts.steps_recorded);
      // the peak: every block from before counts from the start, so it is never below the true one
      if (facts.steps_before_recording === 0) expect(r.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      else expect(r.peak_allocated_bytes).toBeLessThanOrEqual(facts.max_memory_allocated);
      const d = v.devices[0]!;
      expect(d.allocated_bytes).toBe(facts.memory_allocated);
      expect(d.active_blocks).toBe(facts.active_blocks);
      expect(d.inactive_blocks).toBe(facts.snapshot_counts.block_states.inactive ?? 0);
      expect(d.segments).toBe(facts.snapshot_counts.segments);
      expect(d.streams.reduce((s, x) => s + x.active_blocks, 0)).toBe(facts.active_blocks);
      expect(Math.max(...d.pools.map((p) => p.largest_free_block_bytes))).toBe(d.largest_free_block_bytes);
      // the file was dumped just after the counted `_snapshot()`, which the trace records as one entry
      expect(v.trace!.by_action.snapshot).toBe(1);
      expect(v.trace!.entries).toBe(facts.snapshot_counts.trace_entries + 1);
      expect(v.annotations.count).toBe(facts.snapshot_counts.annotations);
    });
  }

  test("recording started after a first step: the 71 MiB from before are found and said", async () => {
    for (const name of ["midrun", "no-zero-grad"]) {
      const { v, facts } = await load(name);
      const b = v.before_recording[0]!;
      // after a first step the process held what it holds after every step (parameters, AdamW's
      // state, cuBLAS workspaces): exactly what torch reports at the end of midrun
      if (name === "midrun") expect(b.allocated_bytes).toBe(facts.memory_allocated);
      expect(b.allocated_bytes).toBeGreaterThan(70 * 2 ** 20);
      expect(b.blocks).toBe(87);
    }
    // from the start of the recording, only the parameters (the model moved to the GPU before it)
    for (const name of ["expandable", "stacks-all", "stacks-python", "oom", "leak"]) {
      const { v } = await load(name);
      expect(v.before_recording[0]!.allocated_bytes).toBe(PARAMETER_BYTES);
    }
  });

  test("categories from frames and ranges: AdamW's state is twice the parameters, no gradient left after zero_grad", async () => {
    for (const name of ["stacks-all", "stacks-python", "expandable"]) {
      const { v } = await load(name);
      expect(cat(v, "optimizer_state")).toBe(2 * PARAMETER_BYTES);
      expect(cat(v, "parameter")).toBe(PARAMETER_BYTES);
      expect(cat(v, "gradient")).toBe(0);
    }
  });

  test("findings: zero_grad forgotten, logits kept every step, an OOM; nothing for the sound runs", async () => {
    const ids = async (name: string) => (await load(name)).v.findings.filter((f) => f.severity !== "info").map((f) => f.id);
    for (const name of ["midrun", "expandable", "stacks-all", "stacks-python"]) expect(await ids(name)).toEqual([]);
    const grad = (await load("no-zero-grad")).v.findings.find((f) => f.id === "gradients_kept")!;
    expect(grad.title).toBe("gradients kept across steps (zero_grad missing?)");
    expect(grad.numbers.held_bytes).toBe(PARAMETER_BYTES);
    const leak = (await load("leak")).v.findings.find((f) => f.id === "growth")!;
    // each step keeps its logits (4 × 64 × 1000 fp32 = 1,024,000 bytes)
    expect(leak.numbers.growth_per_step_bytes).toBe(1_024_000);
    const { v, facts } = await load("oom");
    const oom = v.findings.find((f) => f.id === "oom")!;
    expect(oom.numbers.request_bytes).toBe(16 * 2 ** 40);
    expect(v.oom).toEqual([{ device: 0, requested_bytes: 16 * 2 ** 40, free_bytes: oom.numbers.device_free_bytes as number, time_us: expect.any(Number) }]);
    expect(facts.num_ooms).toBe(1);
    expect(oom.evidence).toContain(`asked for ${formatBytes(16 * 2 ** 40)}`);
  });

  test("`replay SNAPSHOT --json` ends on torch's figures and says what was there before", () => {
    const p = Bun.spawnSync(["bun", CLI, "replay", join(DIR, "midrun.pickle.gz"), "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const facts = require(join(DIR, "midrun.facts.json"));
    const final = JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!);
    expect(final.type).toBe("final");
    expect(final.summary.devices[0].allocated_bytes).toBe(facts.memory_allocated);
    expect(final.summary.devices[0].reserved_bytes).toBe(facts.memory_reserved);
    expect(final.before_recording[0]).toMatchObject({ device: 0, blocks: 87, allocated_bytes: facts.memory_allocated });
    expect(p.stderr.toString()).toContain("memory from before the recording began");
    expect(p.stderr.toString()).toContain("device 0: 71.19 MiB allocated in 87 blocks");
  });
});
