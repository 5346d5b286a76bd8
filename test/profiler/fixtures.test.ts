// The model on rings recorded on an H100 by the agent (test/agent/scenarios.py SCENARIO --save:
// the hook in a real training process, its ring saved with the manifest and, in <name>.facts.json,
// what torch itself reported at the end). Replayed through src/ffi's reader, as `replay` does.
// The four scenarios are the team's fixtures (test/fixtures); names, expandable segments and a
// lapped ring were recorded for these tests (test/profiler/fixtures/rings, see its README).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRing } from "../../src/ffi/ring";
import { blockSize } from "../../src/profiler";
import { blocks, categories, createModel, findings, replay, segments, summary, type NamedTensor, type ReplayFinalLine } from "../../src/profiler";

const TEAM = join(import.meta.dir, "..", "fixtures");
const OWN = join(import.meta.dir, "fixtures", "rings");
const SCENARIOS = ["normal", "no-zero-grad", "kept-loss-graph", "oom"] as const;
const MiB = 1024 * 1024;

async function replayed(name: (typeof SCENARIOS)[number] | "names" | "expandable" | "lapped") {
  const DIR = (SCENARIOS as readonly string[]).includes(name) ? TEAM : OWN;
  const facts = await Bun.file(join(DIR, `${name}.facts.json`)).json();
  const manifest = await Bun.file(join(DIR, `${name}.json`)).json();
  const r = openRing(join(DIR, `${name}.ring`));
  const model = createModel();
  let final: ReplayFinalLine | null = null;
  try {
    for await (const line of replay(r, { ranges: manifest.ranges, model })) if (line.type === "final") final = line;
  } finally {
    r.close();
  }
  return { facts, final: final!, d: final!.summary.devices[0]!, dev: final!.devices[0]!, model };
}

describe("rings recorded on a GPU", () => {
  for (const name of SCENARIOS) {
    test(`${name}: totals equal what torch reported; the records account for them`, async () => {
      const { facts, final, d, dev } = await replayed(name);
      expect(final.lost_records).toBe(0);
      expect(d.totals_source).toBe("blocks");
      expect(d.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      expect(d.peak_note).toBeNull();
      expect(d.allocated_bytes).toBe(facts.memory_allocated);
      expect(d.reserved_bytes).toBe(facts.memory_reserved);
      expect(d.active_bytes).toBe(facts.active);
      expect(d.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      expect(d.n_alloc).toBe(facts.allocation_count);
      expect(d.n_free).toBe(facts.free_count);
      expect(d.n_oom).toBe(facts.num_ooms);
      expect(d.requested_bytes).toBe(facts.requested_bytes);
      // from the records alone: reserved exactly; allocated up to 1 MiB short per large block
      // (the allocator hands out an unsplit block for a remainder ≤ 1 MiB; the trace has the request)
      expect(d.reserved_events_bytes).toBe(facts.memory_reserved);
      expect(d.unaccounted_bytes).toBeGreaterThanOrEqual(0);
      expect(d.unaccounted_bytes).toBeLessThanOrEqual(d.live_blocks * MiB);
      expect(d.partial).toBe(false);
      expect(dev.steps.filter((s) => s.complete).length).toBe(facts.steps);
      // the final state is plain JSON (no NaN, no typed arrays): what `replay --json` prints
      expect(JSON.parse(JSON.stringify(final))).toEqual(final);
    });
  }

  test("normal: the records alone give torch's allocated exactly, every step holds the same at its end, nothing to report", async () => {
    const { facts, final, d, dev } = await replayed("normal");
    expect(d.allocated_events_bytes).toBe(facts.memory_allocated);
    const held = dev.steps.filter((s) => s.complete).map((s) => s.held_at_end_bytes);
    expect(new Set(held).size).toBe(1);
    expect(final.findings).toEqual([]);
    // the peak is reached in backward, inside the user's train_step range
    expect(dev.peak_step.peak.phase).toBe("backward");
    expect(dev.peak_step.peak.range_name).toBe("train_step");
    expect(dev.peak_step.peak.allocated_bytes).toBe(Math.max(...dev.steps.map((s) => s.peak_allocated_bytes)));
    // the whole step runs inside train_step: with the ranges inside it, it allocates all but what
    // the loop does outside it (the batch), and its peak is the step's
    const ts = dev.peak_step.ranges.find((r) => r.name === "train_step")!;
    const mlp = dev.peak_step.ranges.find((r) => r.name === "mlp_block")!;
    expect(mlp.parent).toBe("train_step");
    expect(ts.inclusive_alloc_bytes).toBe(dev.peak_step.ranges.reduce((s, r) => s + r.alloc_bytes, 0));
    expect(ts.inclusive_peak_allocated_bytes).toBe(dev.peak_step.peak.allocated_bytes);
  });

  test("per-phase numbers add up to the step's totals", async () => {
    for (const name of SCENARIOS) {
      const { dev } = await replayed(name);
      for (const b of [dev.last_step, dev.peak_step]) {
        const sum = (k: "alloc_bytes" | "freed_bytes" | "n_alloc") => b.phases.reduce((s, p) => s + p[k], 0);
        expect({ name, step: b.step, alloc: sum("alloc_bytes"), freed: sum("freed_bytes"), n: sum("n_alloc") }).toEqual({
          name,
          step: b.step,
          alloc: b.alloc_bytes,
          freed: b.freed_bytes,
          n: b.n_alloc,
        });
        expect(b.allocated_at_start_bytes + b.alloc_bytes - b.freed_bytes).toBe(b.held_at_end_bytes);
        expect(Math.max(...b.phases.map((p) => p.peak_allocated_bytes ?? 0))).toBe(b.peak.allocated_bytes);
        // what the step's phases hold at the peak, plus what earlier steps left, is the peak
        const atPeak = b.phases.reduce((s, p) => s + p.held_at_step_peak_bytes, 0);
        expect(atPeak + b.peak.from_earlier_steps_bytes).toBe(b.peak.allocated_bytes);
        const byCat = Object.values(b.peak.by_category_bytes).reduce((s, v) => s + v, 0);
        expect(byCat).toBe(b.peak.allocated_bytes);
      }
    }
  });

  test("forgotten zero_grad: gradients held across steps, nothing else", async () => {
    const { final, dev } = await replayed("no-zero-grad");
    expect(final.findings.map((f) => f.id)).toEqual(["gradients_kept"]);
    const f = final.findings[0]!;
    // every step after the first finds the previous step's gradients when its backward begins
    const held = dev.steps.filter((s) => s.step > 0 && s.gradient_held_from_earlier_steps_bytes !== null);
    expect(held.length).toBe(dev.steps.filter((s) => s.complete).length - 1);
    for (const s of held) expect(s.gradient_held_from_earlier_steps_bytes).toBe(f.numbers.held_bytes as number);
    // as many bytes as the parameters, which the model also found
    expect(f.numbers.held_bytes).toBe(dev.categories.categories.find((c) => c.category === "parameter")!.bytes);
    // with zero_grad, the same training holds none
    const normal = await replayed("normal");
    for (const s of normal.dev.steps) expect(s.gradient_held_from_earlier_steps_bytes ?? 0).toBe(0);
  });

  test("kept loss graph: the growth detector trips on activation memory", async () => {
    const { final, dev } = await replayed("kept-loss-graph");
    const f = final.findings.find((x) => x.id === "growth");
    expect(f).toBeDefined();
    expect(f!.numbers.category).toBe("activation");
    const held = dev.steps.filter((s) => s.complete).map((s) => s.held_at_end_bytes);
    expect(f!.numbers.growth_per_step_bytes).toBe(Math.round((held.at(-1)! - held[1]!) / (held.length - 2)));
    expect(final.findings.map((x) => x.id)).not.toContain("gradients_kept");
    // Where it was allocated: the kept graphs' activations come from the forward of mlp_block.
    expect(f!.numbers).toMatchObject({ site_phase: "forward", site_range: "mlp_block" });
    expect(f!.evidence).toMatch(/the \d+ blocks still held \([\d.]+ MiB\) were allocated in forward, in range mlp_block/);
  });

  test("OOM: the incident with request, free memory, totals, phase and step", async () => {
    const { facts, final } = await replayed("oom");
    const f = final.findings[0]!;
    expect(f.id).toBe("oom");
    // scenarios.py asks for 16 TiB after two steps, outside any phase
    expect(f.numbers.request_bytes).toBe(2 ** 44);
    expect(f.numbers.step).toBe(facts.steps);
    expect(f.numbers.phase).toBe("other"); // the schema's name; the words name it apart from the category
    expect(f.evidence).toStartWith(`Out of memory on device 0 in step ${facts.steps}, outside forward, backward and the optimizer: `);
    expect(f.numbers.device_free_bytes as number).toBeGreaterThan(0);
    expect(f.numbers.allocated_bytes as number).toBeLessThanOrEqual(facts.max_memory_allocated);
    expect(f.evidence).toContain("asked for 16.00 TiB");
    // what was live at the OOM, by category, adds up to what was allocated
    const live = Object.entries(f.numbers).filter(([k]) => k.startsWith("live_")).reduce((s, [, v]) => s + (v as number), 0);
    expect(live).toBe(f.numbers.allocated_bytes as number);
  });
});

describe("more recordings: names, expandable segments, a lapped ring", () => {
  test("lifetimes classify what the agent names exactly as the agent does; names then name the blocks", async () => {
    const { model } = await replayed("names");
    const { names } = (await Bun.file(join(OWN, "names.names.json")).json()) as { names: NamedTensor[] };
    const byLifetime = new Map(blocks(model, { limit: Infinity }).blocks.map((b) => [b.address, b.category]));
    const disagree = names.filter((t) => byLifetime.get(t.address) !== t.category).map((t) => `${t.name}: ${t.category} vs ${byLifetime.get(t.address)}`);
    expect(disagree).toEqual([]);
    expect(new Set(names.map((t) => t.category))).toEqual(new Set(["parameter", "optimizer_state"]));
    expect(model.setNames(names)).toEqual({ matched: names.length, added: 0, unknown: 0 });
    const named = blocks(model, { limit: Infinity }).blocks.filter((b) => b.category_source === "names");
    expect(named.length).toBe(names.length);
    expect(named.find((b) => b.name === "0.norm.weight")?.category).toBe("parameter");
    const c = Object.fromEntries(categories(model).categories.map((x) => [x.category, x.bytes]));
    // the blocks hold the named bytes rounded up to the allocator's 512-byte blocks
    expect(c.parameter).toBe(names.filter((t) => t.category === "parameter").reduce((s, t) => s + blockSize(t.size), 0));
  });

  test("expandable segments: totals equal torch's, mapped pages make whole segments", async () => {
    const { facts, d, model } = await replayed("expandable");
    expect(facts.expandable_segments).toBe(true);
    expect(d.allocated_events_bytes).toBe(facts.memory_allocated);
    expect(d.reserved_events_bytes).toBe(facts.memory_reserved);
    const map = segments(model);
    expect(map.approximate).toBe(false);
    expect(map.unplaced_bytes).toBe(0);
    expect(map.segments.reduce((s, x) => s + x.size_bytes, 0)).toBe(facts.memory_reserved);
    expect(findings(model)).toEqual([]);
  });

  test("a ring that lapped: totals exact from the header, block detail partial and said so", async () => {
    const { facts, d, model } = await replayed("lapped");
    expect(d.allocated_bytes).toBe(facts.memory_allocated);
    expect(d.reserved_bytes).toBe(facts.memory_reserved);
    expect(d.partial).toBe(true);
    expect(d.unaccounted_bytes).toBeGreaterThan(0);
    const f = findings(model).find((x) => x.id === "partial")!;
    expect(f.evidence).toContain("frees of blocks allocated before the recording");
    expect(summary(model).partial).toBe(true);
  });
});
