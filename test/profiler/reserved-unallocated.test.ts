// Reserved but unallocated memory (reserved − allocated): measured now and at each step's peak,
// and a finding only where it costs something (THRESHOLDS.unallocated*). Every recording committed
// (sound trainings, a leak, kept gradients, OOMs, snapshots) raises none, and its figure now equals
// torch's own memory_reserved() − memory_allocated() where the recording kept them; allocator
// sequences built for the purpose (trace.ts) raise it for each cost.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DEMO_RING } from "../../src/collect/demo";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, findings, resyncFromSnapshot, summary, THRESHOLDS, unallocatedView, type ProfilerModel } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { readSnapshotFile } from "../../src/snapshot/read";
import { readAll, snapshotReplayOf } from "../../src/snapshot/trace-source";
import { snapshotModel } from "../../src/snapshot/view";
import { ringHeader } from "../support/ring-header";
import { BWD, FWD, MiB, OPT, Trace } from "./trace";
import { recordFields } from "../../src/system/manifest";

const GiB = 1024 * MiB;
const FIX = join(import.meta.dir, "..", "fixtures");
const OWN_RINGS = join(import.meta.dir, "fixtures", "rings");
const OWN_SNAPSHOTS = join(import.meta.dir, "fixtures", "snapshots");

async function ringModel(path: string): Promise<ProfilerModel> {
  const rec = openRingRecording(path);
  const model = createModel();
  try {
    for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, ...recordFields(rec.manifest), model })) {
      // to the end
    }
  } finally {
    rec.close();
  }
  return model;
}

/** Every committed recording: [name, how to build its model, torch's facts at its end or null]. */
function recordings(): Array<[string, () => Promise<ProfilerModel>, { memory_reserved: number; memory_allocated: number; max_memory_reserved?: number; pools?: Array<{ pool_id: number[]; unallocated_bytes: number }> } | null]> {
  const facts = (p: string) => (existsSync(p) ? JSON.parse(readFileSync(p, "utf8")) : null);
  const out: ReturnType<typeof recordings> = [];
  for (const dir of [FIX, OWN_RINGS])
    for (const f of readdirSync(dir).filter((f) => /\.ring(\.gz)?$/.test(f)).sort())
      out.push([f, () => ringModel(join(dir, f)), facts(join(dir, f.replace(/\.ring(\.gz)?$/, ".facts.json")))]);
  out.push(["demo", () => ringModel(DEMO_RING), null]);
  const snaps = join(FIX, "snapshots");
  for (const f of readdirSync(snaps).filter((f) => f.endsWith(".pickle.gz")).sort())
    out.push([`snapshots/${f}`, async () => snapshotModel(await readSnapshotFile(join(snaps, f))).model, facts(join(snaps, f.replace(/\.pickle\.gz$/, ".facts.json")))]);
  out.push(["normal-history.pickle", async () => snapshotModel(await readSnapshotFile(join(FIX, "normal-history.pickle"))).model, facts(join(FIX, "normal-history.facts.json"))]);
  for (const f of readdirSync(OWN_SNAPSHOTS).filter((f) => f.endsWith(".snapshot.json")).sort())
    out.push([
      f,
      async () => {
        const r = snapshotReplayOf(await Bun.file(join(OWN_SNAPSHOTS, f)).json());
        const m = createModel();
        m.setRanges(r.ranges);
        m.ingest(readAll(r));
        return m;
      },
      facts(join(OWN_SNAPSHOTS, f.replace(/\.snapshot\.json$/, ".facts.json"))),
    ]);
  return out;
}

describe("every committed recording", () => {
  const all = recordings();
  test("there are rings, the demo and snapshots among them, most with torch's facts", () => {
    expect(all.length).toBeGreaterThanOrEqual(20);
    expect(all.filter(([, , f]) => f && typeof f.memory_reserved === "number").length).toBeGreaterThanOrEqual(18);
  });
  for (const [name, build, facts] of all) {
    test(`${name}: no reserved but unallocated finding; now is torch's reserved − allocated; each step's reserved at its peak holds its peak`, async () => {
      const m = await build();
      const ids = findings(m).map((f) => f.id);
      expect(ids).not.toContain("reserved_unallocated");
      expect(ids).not.toContain("fragmentation");
      const d = m.devices[0]!;
      const u = unallocatedView(m, d);
      // A CUDA graphs' private pool is memory of its own (facts.pools, per segment_pool_id), not the cache's.
      const pooled = (facts?.pools ?? []).filter((p) => p.pool_id.some((x) => x !== 0)).reduce((a, p) => a + p.unallocated_bytes, 0);
      // A ring whose records carry no pools (recorded before they did) cannot leave them out.
      const told = u.private_pools !== null;
      if (facts && typeof facts.memory_reserved === "number") expect(u.now_bytes).toBe(facts.memory_reserved - facts.memory_allocated - (told ? pooled : 0));
      for (const r of d.steps) {
        if (r.partial) continue;
        expect(r.reserved_at_peak).toBeGreaterThanOrEqual(r.peak_allocated);
        if (facts?.max_memory_reserved) expect(r.reserved_at_peak).toBeLessThanOrEqual(facts.max_memory_reserved);
      }
    }, 30_000);
  }
});

describe("the OOM recordings", () => {
  // torch's allocator frees its cache and retries cudaMalloc once before every OOM it raises: the
  // recorded facts say 1 retry, 1 OOM, and what it held unallocated was far below the request.
  test("oom.ring: the OOM is a finding; its retry is the OOM's own and its unallocated bytes could not have held the request", async () => {
    const facts = JSON.parse(await Bun.file(join(FIX, "oom.facts.json")).text());
    expect(facts.num_alloc_retries).toBe(facts.num_ooms);
    const m = await ringModel(join(FIX, "oom.ring"));
    const s = summary(m).devices[0]!;
    expect(s.n_retries).toBe(facts.num_alloc_retries);
    expect(s.n_oom).toBe(facts.num_ooms);
    const o = m.devices[0]!.ooms[0]!;
    expect(o.reserved_bytes - o.allocated_bytes).toBeLessThan(o.request_bytes / 1e5);
    const ids = findings(m).map((f) => f.id);
    expect(ids).toContain("oom");
    expect(ids).not.toContain("reserved_unallocated");
  });

  test("snapshots/oom: the same from a snapshot (1 retry, 1 OOM)", async () => {
    const facts = JSON.parse(await Bun.file(join(FIX, "snapshots", "oom.facts.json")).text());
    expect(facts.num_alloc_retries).toBe(facts.num_ooms);
    const m = snapshotModel(await readSnapshotFile(join(FIX, "snapshots", "oom.pickle.gz"))).model;
    expect(findings(m).map((f) => f.id)).toEqual(["oom"]);
  });
});

/**
 * A warm-up step that reserves a 4 GiB segment for one 3 GiB block, then `steps` steps whose
 * blocks are 64 MiB (two at once, in a 256 MiB segment of their own); `big`: every step also
 * uses the 3 GiB block.
 */
function idleAtPeak(steps: number, big: boolean): ProfilerModel {
  const tr = new Trace();
  const A = 0x1_0000_0000;
  const B = 0x2_0000_0000;
  tr.segment(A, 4 * GiB).alloc(A, 3 * GiB).free(A, 3 * GiB);
  tr.nextStep().segment(B, 256 * MiB);
  for (let s = 0; s < steps; s++) {
    tr.setPhase(FWD).alloc(B, 64 * MiB).alloc(B + 64 * MiB, 64 * MiB);
    if (big) tr.alloc(A, 3 * GiB);
    tr.setPhase(BWD).free(B, 64 * MiB).free(B + 64 * MiB, 64 * MiB);
    if (big) tr.free(A, 3 * GiB);
    tr.setPhase(OPT).nextStep();
  }
  const m = createModel();
  m.ingest(tr.batch());
  return m;
}

describe("where it costs something", () => {
  test("a step's record: reserved when its peak was reached (not after) and its largest block", () => {
    const tr = new Trace();
    tr.nextStep().segment(0x1000_0000, 100 * MiB).alloc(0x1000_0000, 80 * MiB).free(0x1000_0000, 80 * MiB);
    tr.segment(0x4000_0000, 50 * MiB).alloc(0x4000_0000, 40 * MiB).nextStep();
    const m = createModel();
    m.ingest(tr.batch());
    const r = m.devices[0]!.steps.find((x) => x.step === 1)!;
    expect(r.peak_allocated).toBe(80 * MiB);
    expect(r.reserved_at_peak).toBe(100 * MiB);
    expect(r.reserved_at_end).toBe(150 * MiB);
    expect(r.largest_alloc_bytes).toBe(80 * MiB);
  });

  test("memory idle at the step's peak, many times its largest block: an info finding that says what a ring cannot tell and where empty_cache() applies", () => {
    const m = idleAtPeak(3, false);
    const u = unallocatedView(m, m.devices[0]!);
    expect(u).toMatchObject({ at_peak_bytes: 4 * GiB + 128 * MiB, reserved_at_peak_bytes: 4 * GiB + 256 * MiB, peak_allocated_bytes: 128 * MiB, largest_alloc_bytes: 64 * MiB, private_pools: null });
    const f = findings(m).filter((x) => x.id === "reserved_unallocated");
    expect(f.length).toBe(1);
    expect(f[0]!.severity).toBe("info");
    expect(f[0]!.title).toBe(`4.13 GiB reserved but unallocated at step ${u.step}'s peak, 66× its largest block`);
    expect(f[0]!.numbers).toMatchObject({ reserved_unallocated_at_peak_bytes: 4 * GiB + 128 * MiB, largest_alloc_bytes: 64 * MiB, alloc_retries: 0, releasable_bytes: 4 * GiB + 256 * MiB, private_pools_reserved_bytes: null });
    expect(f[0]!.evidence).toContain('torch.compile mode="reduce-overhead"');
    expect(f[0]!.evidence).toContain("empty_cache() would give 4.25 GiB back to other processes now");
    expect(f[0]!.evidence).toContain("expandable_segments:True");
    expect(f[0]!.evidence).not.toContain("max_split_size_mb");
  });

  test("the same memory, where each step's largest block could use it: no finding (a sound training's cache)", () => {
    const m = idleAtPeak(3, true);
    const u = unallocatedView(m, m.devices[0]!);
    expect(u.at_peak_bytes).toBe(1 * GiB + 128 * MiB);
    expect(u.at_peak_bytes!).toBeGreaterThanOrEqual(THRESHOLDS.unallocatedAtPeakMinBytes);
    expect(u.at_peak_bytes!).toBeLessThan(THRESHOLDS.unallocatedAtPeakRequests * u.largest_alloc_bytes!);
    expect(findings(m).map((x) => x.id)).not.toContain("reserved_unallocated");
  });

  test("a private pool a snapshot named (a CUDA graph's) is left out: its memory is the graph's, not the cache's", () => {
    const m = idleAtPeak(3, false);
    const d = m.devices[0]!;
    d.privatePools = [{ pool_id: [1, 0], segments: 1, reserved_bytes: 4 * GiB, allocated_bytes: 0 }];
    const u = unallocatedView(m, d);
    expect(u.now_bytes).toBe(256 * MiB);
    expect(u.at_peak_bytes).toBe(128 * MiB);
    expect(findings(m).map((x) => x.id)).not.toContain("reserved_unallocated");
  });

  test("a resync's segments (a snapshot's) tell the model its pools; an id that is no pair is refused", () => {
    const m = idleAtPeak(3, false);
    const A = 0x1_0000_0000;
    const B = 0x2_0000_0000;
    resyncFromSnapshot(m, [
      { address: A, total_size: 4 * GiB, device: 0, stream: 7, blocks: [{ address: A, size: 4 * GiB, state: "inactive" }], segment_pool_id: [2, 1] },
      { address: B, total_size: 256 * MiB, device: 0, stream: 7, blocks: [{ address: B, size: 64 * MiB, state: "active_allocated" }], segment_pool_id: [0, 0] },
    ], 2e6);
    const d = m.devices[0]!;
    expect(d.privatePools).toEqual([{ pool_id: [2, 1], segments: 1, reserved_bytes: 4 * GiB, allocated_bytes: 0 }]);
    expect(unallocatedView(m, d).now_bytes).toBe(192 * MiB);
    expect(() => resyncFromSnapshot(m, [{ address: A, total_size: 4 * GiB, device: 0, segment_pool_id: [1] }], 3e6)).toThrow("the segment at 0x100000000: segment_pool_id must be a pair of non-negative integers, got [1]");
  });

  test("allocation retries beyond the OOMs' own: a warning; one retry with its OOM is the OOM's", () => {
    const tr = new Trace().segment(0x1000_0000, 100 * MiB).alloc(0x1000_0000, 10 * MiB);
    const m = createModel();
    m.ingest(tr.batch());
    m.setHeader(ringHeader([{ allocated: 10 * MiB, reserved: 100 * MiB, n_retries: 3, n_oom: 1 }]));
    const f = findings(m).find((x) => x.id === "reserved_unallocated")!;
    expect(f.severity).toBe("warning");
    expect(f.numbers.alloc_retries).toBe(2);
    expect(f.title).toBe("2 allocation retries; 90.00 MiB reserved but unallocated now"); // no step settled yet
    expect(f.evidence).toContain("90.00 MiB reserved but unallocated now");
    expect(f.evidence).toContain("max_split_size_mb");
    expect(f.evidence).not.toContain("empty_cache");
    m.setHeader(ringHeader([{ allocated: 10 * MiB, reserved: 100 * MiB, n_retries: 1, n_oom: 1 }]));
    expect(findings(m).map((x) => x.id)).not.toContain("reserved_unallocated");
  });
});
