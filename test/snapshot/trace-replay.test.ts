// The model on PyTorch memory snapshots recorded on an H100 (test/profiler/fixtures/snapshots):
// what torch reported at the end of each run is in <name>.facts.json, and the model, fed the
// snapshot's device_traces from the memory that existed before the recording (68 MB in three of
// them: recording began after a first step), must end exactly on it.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  breakdown,
  createModel,
  findings,
  replay,
  resyncFromSnapshot,
  steps,
  summary,
  type ReplayLine,
} from "../../src/profiler";
import { formatBytes } from "../../src/words";
import { readAll, snapshotReplayOf } from "../../src/snapshot/trace-source";

const DIR = join(import.meta.dir, "..", "profiler", "fixtures", "snapshots");
const snapshotTraceToBatch = (snap: Parameters<typeof snapshotReplayOf>[0]) => {
  const r = snapshotReplayOf(snap);
  return { ...r, batch: readAll(r) };
};
const NAMES = ["normal", "no-zero-grad", "kept-loss-graph", "oom"] as const;

async function load(name: (typeof NAMES)[number]) {
  const snap = await Bun.file(join(DIR, `${name}.snapshot.json`)).json();
  const facts = await Bun.file(join(DIR, `${name}.facts.json`)).json();
  const conv = snapshotTraceToBatch(snap);
  const m = createModel();
  // what existed before the recording: as many records as its blocks and segments
  m.setRanges(conv.ranges);
  m.ingest(conv.batch);
  return { snap, facts, conv, m };
}

describe("PyTorch snapshots recorded on a GPU", () => {
  for (const name of NAMES) {
    test(`${name}: allocated and its peak equal what torch reported`, async () => {
      const { facts, conv, m } = await load(name);
      expect(conv.time_source).toBe("recorded");
      const before = conv.before[0]!;
      expect(conv.batch.count).toBe(facts.entries + facts.annotations + before.blocks.length + before.segments.length);
      const d = summary(m).devices[0]!;
      // blocks alive before recording began (cuBLAS workspaces, the first step's) come from the
      // trace's unmatched frees and the final segments: the replay ends on torch's own figures
      expect(before.allocated_bytes).toBe(facts.allocated_before_recording);
      expect(d.allocated_bytes).toBe(facts.memory_allocated);
      expect(d.reserved_bytes).toBe(facts.memory_reserved);
      expect(d.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      // a snapshot's trace has no sync records: nothing ties torch's figures to a point of it
      expect(d.unaccounted_bytes).toBeNull();
      expect(d.sync.checks).toBe(0);
    });
  }

  test("normal: reserved equals torch's, one step per optimizer step, no findings", async () => {
    const { facts, m } = await load("normal");
    expect(summary(m).devices[0]!.reserved_bytes).toBe(facts.memory_reserved);
    const s = steps(m).steps;
    expect(s.filter((x) => x.complete).length).toBe(facts.steps);
    // what each step holds at its end is what torch reported after it (plus the blocks from before)
    const held = s.filter((x) => x.complete).map((x) => x.held_at_end_bytes + facts.allocated_before_recording);
    expect(held).toEqual(facts.allocated_after_step);
    expect(findings(m)).toEqual([]);
    const b = breakdown(m, { step: 3 });
    expect(b.ranges.map((r) => r.name)).toContain("model_forward");
    expect(b.phases.reduce((x, p) => x + p.alloc_bytes, 0)).toBe(b.alloc_bytes);
  });

  test("kept-loss-graph: the growth detector trips, naming the range that grows", async () => {
    const { facts, m } = await load("kept-loss-graph");
    const f = findings(m).find((x) => x.id === "growth");
    expect(f).toBeDefined();
    const perStep = facts.allocated_after_step[3] - facts.allocated_after_step[2];
    expect(f!.numbers.growth_per_step_bytes).toBe(perStep);
    expect(f!.numbers.range).toBe("validation");
    // nearly all of it in that range (the running total itself is added outside it)
    expect(f!.numbers.range_growth_per_step_bytes as number).toBeGreaterThan(0.99 * perStep);
    expect(f!.numbers.range_growth_per_step_bytes as number).toBeLessThanOrEqual(perStep);
    // the same training without the kept graph does not trip it
    expect(findings((await load("no-zero-grad")).m).find((x) => x.id === "growth")).toBeUndefined();
  });

  test("oom: the incident carries the request and the free memory torch reported", async () => {
    const { facts, m } = await load("oom");
    const f = findings(m)[0]!;
    expect(f.id).toBe("oom");
    const asked = /Tried to allocate ([\d.]+ GiB)/.exec(facts.oom_message)![1];
    const free = /of which ([\d.]+ GiB) is free/.exec(facts.oom_message)![1];
    expect(formatBytes(f.numbers.request_bytes as number)).toBe(asked!);
    expect(formatBytes(f.numbers.device_free_bytes as number)).toBe(free!);
    expect(f.numbers.range).toBe("huge_buffer");
    expect((f.numbers.allocated_bytes as number) + facts.allocated_before_recording).toBeLessThanOrEqual(facts.max_memory_allocated);
    expect(f.evidence).toContain(`asked for ${asked}`);
  });

  test("replay of a snapshot: states in time order, the last line final with the findings", async () => {
    const { snap, facts } = await load("kept-loss-graph");
    const { source, ranges } = snapshotReplayOf(snap);
    const lines: ReplayLine[] = [];
    for await (const line of replay(source, { ranges, state_every_us: 2_000, batch_size: 100 }))
      lines.push(JSON.parse(JSON.stringify(line)));
    const states = lines.filter((l) => l.type === "state");
    // the recording lasts 34 ms: a state every 2 ms of it
    expect(states.length).toBeGreaterThan(10);
    const times = states.map((s) => s.time_us!);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    const last = lines.at(-1)!;
    expect(last.type).toBe("final");
    if (last.type !== "final") return;
    expect(last.findings.map((f) => f.id)).toContain("growth");
    expect(last.summary.devices[0]!.allocated_bytes).toBe(facts.memory_allocated);
    expect(last.devices[0]!.steps.filter((s) => s.complete).length).toBe(facts.steps);
  });
});

describe("snapshot trace conversion", () => {
  test("bad input gets a clear error", () => {
    expect(() => snapshotTraceToBatch({} as never)).toThrow(/no device_traces/);
    expect(() => snapshotTraceToBatch({ device_traces: [[{ action: "malloc", addr: 1, size: 2, time_us: 3 }]] })).toThrow(/device_traces\[0\]\[0\]: unknown action "malloc"/);
    expect(() => snapshotTraceToBatch({ device_traces: [[{ action: "alloc", addr: -1, size: 2, time_us: 3 }]] })).toThrow(/addr must be a non-negative number/);
  });

  test("entries without time keep their order", () => {
    const c = snapshotTraceToBatch({ device_traces: [[{ action: "alloc", addr: 4096, size: 512 }, { action: "free_requested", addr: 4096, size: 512 }]] });
    expect(c.time_source).toBe("order");
    expect([...c.batch.action.subarray(0, 2)]).toEqual([0, 1]);
  });
});

describe("resynchronizing block detail from a snapshot's segments", () => {
  test("half the trace lost: the snapshot's segments make block detail whole and equal to torch's", async () => {
    const { snap, facts } = await load("kept-loss-graph");
    const conv = snapshotTraceToBatch(snap);
    const m = createModel();
    // the reader lost the first half of the records (the ring lapped)
    const half = Math.floor(conv.batch.count / 2);
    m.ingest(conv.batch, half, half, conv.batch.count);
    expect(summary(m).devices[0]!.partial).toBe(true);
    const r = resyncFromSnapshot(m, snap.segments, conv.batch.time_us[conv.batch.count - 1]!);
    expect(r[0]!.added).toBeGreaterThan(0);
    const d = summary(m).devices[0]!;
    expect(d.partial).toBe(false);
    expect(d.allocated_bytes).toBe(facts.memory_allocated);
    expect(d.reserved_bytes).toBe(facts.memory_reserved);
    const active = snap.segments.flatMap((s: { blocks: { state: string; size: number }[] }) => s.blocks).filter((b: { state: string }) => b.state === "active_allocated");
    expect(d.live_blocks).toBe(active.length);
    expect(() => resyncFromSnapshot(m, [{ address: "x" } as never], 0)).toThrow(/segments\[0\]: a segment needs numeric address/);
  });
});
