// Recordings that hold the whole run, on an NVIDIA H200 with torch 2.11 (test/fixtures/README.md):
// three snapshots whose `_record_memory_history(stacks="python")` is the program's first line
// (snapshots/capture_more.py), and a ring of a torch.compile(mode="reduce-overhead") run
// (test/gpu/compile_graphs.py). With nothing before the recording, the peak the replay finds is
// torch's max_memory_allocated() to the byte; every figure here is torch's own, from the facts
// recorded beside each file. CUDA graphs allocate from a private pool: a snapshot names it per
// segment, and the product must report it in PyTorch's terms (torch's pool ids and bytes), never as
// the default pool's idle cache; so does the ring, whose segment records carry their pool (the
// manifest's segment_pools; a ring recorded before says the pools are not told apart).
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, findings, replay, summary, unallocatedView, type ProfilerModel } from "../../src/profiler";
import { readSnapshotFile } from "../../src/snapshot/read";
import { summarize } from "../../src/snapshot/summary";
import { snapshotModel, viewJson } from "../../src/snapshot/view";
import { ProcessScreen } from "../../src/tui/screens/process";
import { SegmentsScreen } from "../../src/tui/screens/segments";
import { Wide } from "../support/wide";
import { formatBytes } from "../../src/words";
import { recordFields } from "../../src/system/manifest";

const FIX = join(import.meta.dir, "..", "fixtures");
const SNAP = join(FIX, "snapshots");
const SNAPSHOTS = ["first-line-keep-logits", "resnet-no-zero-grad", "compile-graphs"];
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
const json = (path: string) => JSON.parse(readFileSync(path, "utf8"));
const UNALLOCATED_IDS = ["reserved_unallocated", "fragmentation"];

interface PoolFacts { pool_id: [number, number]; segments: number; reserved_bytes: number; allocated_bytes: number; unallocated_bytes: number }
/** torch's pools from the facts (per segment_pool_id of _snapshot()): the default (0, 0) and the rest. */
function poolsOf(facts: { pools: PoolFacts[] }) {
  const isDefault = (p: PoolFacts) => p.pool_id[0] === 0 && p.pool_id[1] === 0;
  return { dflt: facts.pools.find(isDefault)!, others: facts.pools.filter((p) => !isDefault(p)) };
}

function screens(model: ProfilerModel, pid: number, title: string) {
  const pm = { pid, model, source: "replay" as const, socket: null, title, ended: true };
  const seg = render(<Wide columns={200}><SegmentsScreen pm={pm} width={200} height={30} ascii={false} selected={0} /></Wide>);
  const segments = plain(seg.lastFrame()!).split("\n");
  seg.unmount();
  const proc = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={50} ascii={false} /></Wide>);
  const process = plain(proc.lastFrame()!);
  proc.unmount();
  return { segments, process };
}

describe("snapshots recorded from the program's first line: torch's figures to the byte", () => {
  for (const name of SNAPSHOTS) {
    test(`${name}: the peak is max_memory_allocated; the end, memory_allocated and memory_reserved`, async () => {
      const path = join(SNAP, `${name}.pickle.gz`);
      const facts = json(join(SNAP, `${name}.facts.json`));
      // the premise of an exact peak: the recording began before any CUDA memory existed
      expect(facts.steps_before_recording).toBe(0);
      const v = await viewJson(path);
      expect(v.before_recording).toEqual([{ device: 0, blocks: 0, allocated_bytes: 0, active_bytes: 0, segments: 0, reserved_bytes: 0 }]);
      const r = v.replay.devices[0]!;
      expect(r.block_sizes).toMatchObject({ inferred: 0, disagreements: 0 });
      expect(r.steps).toBe(facts.steps_recorded);
      expect(r.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      expect(r.allocated_bytes).toBe(facts.memory_allocated);
      expect(r.reserved_bytes).toBe(facts.memory_reserved);
      // the snapshot's final segments (the summary) agree
      expect(v.devices[0]).toMatchObject({ allocated_bytes: facts.memory_allocated, reserved_bytes: facts.memory_reserved, segments: facts.segments });
      // the model the screens show (taken onto the segments at the end): the same, reserved's peak too
      const { model } = snapshotModel(await readSnapshotFile(path), { resync: true });
      expect(summary(model).devices[0]).toMatchObject({
        allocated_bytes: facts.memory_allocated,
        reserved_bytes: facts.memory_reserved,
        peak_allocated_bytes: facts.max_memory_allocated,
        peak_reserved_bytes: facts.max_memory_reserved,
        partial: false,
      });
    });
  }
});

describe("compile-graphs snapshot: the CUDA graphs' private pool in PyTorch's terms", () => {
  const path = join(SNAP, "compile-graphs.pickle.gz");
  const facts = json(join(SNAP, "compile-graphs.facts.json"));
  const { dflt, others } = poolsOf(facts);

  test("the facts have the graphs' pool (else this file tests nothing)", () => {
    expect(facts.cudagraphs_used).toBe(true);
    expect(others.length).toBeGreaterThan(0);
    expect(others.reduce((a, p) => a + p.reserved_bytes, 0)).toBeGreaterThan(0);
  });

  test("the summary: each private pool with torch's id and bytes; reserved but unallocated is the default pool's", async () => {
    const d = summarize(await readSnapshotFile(path)).devices[0]!;
    expect(d.private_pools).toEqual(others.map((p) => ({ pool_id: p.pool_id, segments: p.segments, reserved_bytes: p.reserved_bytes, allocated_bytes: p.allocated_bytes })));
    expect(d.reserved_unallocated_bytes).toBe(dflt.unallocated_bytes);
    // torch's totals count every pool, as memory_reserved() and memory_allocated() do
    expect(d.reserved_bytes).toBe(facts.memory_reserved);
    expect(d.allocated_bytes).toBe(facts.memory_allocated);
    // the per-type lines of a private pool (large and small) add up to torch's figure of that pool
    for (const p of others) {
      const mine = d.pools.filter((l) => l.pool.endsWith(`(pool ${p.pool_id.join(", ")})`));
      expect(mine.reduce((a, l) => a + l.reserved_bytes, 0)).toBe(p.reserved_bytes);
      expect(mine.reduce((a, l) => a + l.segments, 0)).toBe(p.segments);
    }
  });

  test("the model: the pools are told to it, now is the default pool's unallocated, no finding counts the pools", async () => {
    const { model } = snapshotModel(await readSnapshotFile(path), { resync: true });
    const d = model.devices[0]!;
    expect(d.privatePools).toEqual(others.map((p) => ({ pool_id: p.pool_id, segments: p.segments, reserved_bytes: p.reserved_bytes, allocated_bytes: p.allocated_bytes })));
    expect(unallocatedView(model, d)).toMatchObject({
      now_bytes: dflt.unallocated_bytes,
      private_unallocated_bytes: others.reduce((a, p) => a + p.unallocated_bytes, 0),
    });
    const ids = findings(model).map((f) => f.id);
    for (const id of UNALLOCATED_IDS) expect(ids).not.toContain(id);
  });

  // The program calls opt.zero_grad(set_to_none=True) every step, yet two 512-byte blocks that CUDA
  // graph capture allocates during backward (torch/cuda/graphs.py capture_begin, 8 bytes requested
  // each) live on and are taken for gradients by their lifetime: all the "gradient" memory carried
  // into steps 3..5. Against the gradient set a backward made (2.06 MiB) they are not the gradients kept.
  test("the model: no gradients_kept finding for a run that zeroes its gradients every step", async () => {
    const { model } = snapshotModel(await readSnapshotFile(path), { resync: true });
    expect(findings(model).map((f) => f.id)).not.toContain("gradients_kept");
  });

  test("on the screens: the pool on a line of its own, torch's bytes; unallocated the default pool's", async () => {
    const { model } = snapshotModel(await readSnapshotFile(path), { resync: true });
    const { segments, process } = screens(model, 0, "snapshot");
    const now = `reserved but unallocated ${formatBytes(dflt.unallocated_bytes)} now, `;
    expect(segments[0]).toStartWith(`${facts.segments} segments: reserved ${formatBytes(facts.memory_reserved)}, allocated ${formatBytes(facts.memory_allocated)}, ${now}`);
    const each = others.map((p) => `pool (${p.pool_id.join(", ")}) ${formatBytes(p.reserved_bytes)} reserved, ${formatBytes(p.allocated_bytes)} allocated`);
    expect(segments[1]).toBe(`private pools (CUDA graphs, torch.cuda.MemPool): ${each.join("; ")}`);
    expect(process).toMatch(new RegExp(`^${now}[\\d.]+ [KMG]?i?B at step \\d+'s peak; not counted: private pools`, "m"));
    expect(process).not.toContain("fragmentation");
  });
});

describe("compile-graphs ring: a CUDA-graphs run under the agent, replayed", () => {
  const facts = json(join(FIX, "compile-graphs.facts.json"));
  const model = createModel().keepTrace();
  beforeAll(async () => {
    // as test/support/replayed.ts plays a .ring, here gzip'd
    const rec = openRingRecording(join(FIX, "compile-graphs.ring.gz"));
    try {
      expect(rec.manifest?.segment_pools).toBe(true);
      for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model })) {
        // to the end
      }
    } finally {
      rec.close();
    }
  });

  test("its end and peaks are torch's figures, every record there", () => {
    // the ring saved with the steps done: every allocation and free of the run, none lost
    expect(facts.ring_lapped).toBe(false);
    expect(summary(model).devices[0]).toMatchObject({
      lost_records: 0,
      partial: false,
      step: facts.steps,
      allocated_bytes: facts.memory_allocated,
      reserved_bytes: facts.memory_reserved,
      peak_allocated_bytes: facts.max_memory_allocated,
      peak_reserved_bytes: facts.max_memory_reserved,
      n_alloc: facts.allocation_count,
      n_free: facts.free_count,
      n_segment_alloc: facts.segment_alloc_count,
      n_segment_free: facts.segment_free_count,
    });
  });

  test("no warning: the graphs' private pool, idle between replays, is not called wasted cache", () => {
    const { others } = poolsOf(facts);
    // what would be taken for idle cache: the facts' private pool, reserved and unallocated
    expect(others.reduce((a, p) => a + p.unallocated_bytes, 0)).toBeGreaterThan(100 * 1024 * 1024);
    const all = findings(model);
    expect(all.filter((f) => f.severity === "warning")).toEqual([]);
    for (const id of UNALLOCATED_IDS) expect(all.map((f) => f.id)).not.toContain(id);
  });

  test("the pools from the records: torch's pool ids and bytes; now is the default pool's idle cache", () => {
    const d = model.devices[0]!;
    const { dflt, others } = poolsOf(facts);
    expect(d.privatePools).toEqual(others.map((p) => ({ pool_id: p.pool_id, segments: p.segments, reserved_bytes: p.reserved_bytes, allocated_bytes: p.allocated_bytes })));
    expect(unallocatedView(model, d)).toMatchObject({ now_bytes: dflt.unallocated_bytes, private_unallocated_bytes: others.reduce((a, p) => a + p.unallocated_bytes, 0) });
    const { segments, process } = screens(model, 4242, "compile-graphs.ring");
    expect(segments[0]).toContain(`reserved but unallocated ${formatBytes(dflt.unallocated_bytes)} now, `);
    expect(segments[1]).toBe(`private pools (CUDA graphs, torch.cuda.MemPool): ${others.map((p) => `pool (${p.pool_id.join(", ")}) ${formatBytes(p.reserved_bytes)} reserved, ${formatBytes(p.allocated_bytes)} allocated`).join("; ")}`);
    expect(process).toContain("not counted: private pools");
    expect(process).not.toContain("fragmentation");
  });
});
