// Private pools in a snapshot: CUDA graphs (torch.compile mode="reduce-overhead") and
// torch.cuda.MemPool allocate from pools of their own, named by each segment's segment_pool_id
// ((0, 0): the default pool). The H100 snapshot (test/fixtures/normal-history.pickle) has the
// default pool only; here Python's pickle gives a third of its segments a private pool's id, as a
// graph's segments carry it, and works out what each pool holds. The summary, the model and the
// screens show those pools with their own bytes, never as the default pool's reserved but
// unallocated memory.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { findings, unallocatedView } from "../../src/profiler";
import { SnapshotError } from "../../src/snapshot/pickle";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { privatePools, summarize } from "../../src/snapshot/summary";
import { snapshotModel } from "../../src/snapshot/view";
import { SegmentsScreen } from "../../src/tui/screens/segments";
import { Wide } from "../support/wide";
import { ProcessScreen } from "../../src/tui/screens/process";
import { formatBytes } from "../../src/words";
import { replayed } from "../support/replayed";

const FIX = join(import.meta.dir, "..", "fixtures");
const data = new Uint8Array(readFileSync(join(FIX, "normal-history.pickle")));
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

function python(code: string, input: Uint8Array): string {
  const p = Bun.spawnSync(["python3", "-c", code], { stdin: Buffer.from(input), stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return p.stdout.toString();
}

// Every third segment (in address order) joins pool (1, 0); Python's own figures of each pool.
const out = JSON.parse(
  python(
    `
import sys, pickle, json
d = pickle.load(sys.stdin.buffer)
segs = sorted(d['segments'], key=lambda s: s['address'])
for i, s in enumerate(segs):
    if i % 3 == 0: s['segment_pool_id'] = (1, 0)
def alloc(s): return sum(b['size'] for b in s['blocks'] if b['state'] == 'active_allocated')
mine = [s for s in segs if s['segment_pool_id'] == (1, 0)]
dflt = [s for s in segs if s['segment_pool_id'] == (0, 0)]
free = [b['size'] for s in dflt for b in s['blocks'] if b['state'] == 'inactive']
print(json.dumps({
  'pickle': pickle.dumps(d, protocol=2).hex(),
  'pool': {'segments': len(mine), 'reserved': sum(s['total_size'] for s in mine), 'allocated': sum(alloc(s) for s in mine)},
  'default_unallocated': sum(s['total_size'] for s in dflt) - sum(alloc(s) for s in dflt),
  'default_largest_free': max(free), 'default_frag': 1 - max(free) / sum(free),
  'reserved': sum(s['total_size'] for s in segs), 'allocated': sum(alloc(s) for s in segs)}))`,
    data,
  ),
);
const pooled = new Uint8Array(Buffer.from(out.pickle, "hex"));

describe("a snapshot with a private pool", () => {
  test("the summary: the pool with its own bytes; reserved but unallocated, the largest free block and fragmentation are the default pool's", () => {
    const s = summarize(parseSnapshotBytes(pooled));
    const d = s.devices[0]!;
    expect(d.private_pools).toEqual([{ pool_id: [1, 0], segments: out.pool.segments, reserved_bytes: out.pool.reserved, allocated_bytes: out.pool.allocated }]);
    expect(d.reserved_unallocated_bytes).toBe(out.default_unallocated);
    expect(d.largest_free_block_bytes).toBe(out.default_largest_free);
    expect(d.fragmentation).toBeCloseTo(out.default_frag, 12);
    // torch's totals count every pool, as memory_reserved() and memory_allocated() do
    expect(d.reserved_bytes).toBe(out.reserved);
    expect(d.allocated_bytes).toBe(out.allocated);
    expect(d.pools.filter((p) => p.pool.endsWith("(pool 1, 0)")).reduce((a, p) => a + p.allocated_bytes, 0)).toBe(out.pool.allocated);
    // The file as recorded: the default pool only, its unallocated bytes all of reserved − allocated.
    const plainSummary = summarize(parseSnapshotBytes(data)).devices[0]!;
    expect(plainSummary.private_pools).toEqual([]);
    expect(plainSummary.reserved_unallocated_bytes).toBe(plainSummary.reserved_bytes - plainSummary.allocated_bytes);
  });

  test("the model is told the pools: its reserved but unallocated figure leaves them out, and no finding counts them", () => {
    const { model } = snapshotModel(parseSnapshotBytes(pooled), { resync: true });
    const d = model.devices[0]!;
    expect(privatePools(parseSnapshotBytes(pooled).root).get(0)).toEqual(d.privatePools!.slice());
    expect(unallocatedView(model, d).now_bytes).toBe(out.default_unallocated);
    expect(findings(model).map((f) => f.id)).not.toContain("reserved_unallocated");
  });

  test("on the screens: the pool on a line of its own", () => {
    const { model } = snapshotModel(parseSnapshotBytes(pooled), { resync: true });
    const pm = { pid: 0, model, source: "replay" as const, socket: null, title: "snapshot", ended: true };
    const pools = `private pools (CUDA graphs, torch.cuda.MemPool): pool (1, 0) ${formatBytes(out.pool.reserved)} reserved, ${formatBytes(out.pool.allocated)} allocated`;
    const seg = render(<Wide columns={200}><SegmentsScreen pm={pm} width={200} height={30} ascii={false} selected={0} /></Wide>);
    const lines = plain(seg.lastFrame()!).split("\n");
    seg.unmount();
    expect(lines[0]).toContain(`reserved but unallocated ${formatBytes(out.default_unallocated)} now, `);
    expect(lines[1]).toBe(pools);
    const proc = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={50} ascii={false} /></Wide>);
    const frame = plain(proc.lastFrame()!);
    proc.unmount();
    expect(frame).toMatch(new RegExp(`^reserved but unallocated ${formatBytes(out.default_unallocated)} now, [\\d.]+ [KMG]?i?B at step \\d+'s peak; not counted: private pools \\(CUDA graphs, torch\\.cuda\\.MemPool\\): pool \\(1, 0\\) ${formatBytes(out.pool.reserved)} reserved`, "m"));
    expect(frame).not.toContain("fragmentation");
  });

});

describe("a ring recorded before its segment records carried pools (normal.ring)", () => {
  test("now is torch's reserved − allocated, beside its last step's peak; its pools are said not to be told apart", async () => {
    const facts = JSON.parse(readFileSync(join(FIX, "normal.facts.json"), "utf8"));
    const pm = await replayed("normal");
    const now = `reserved but unallocated ${formatBytes(facts.memory_reserved - facts.memory_allocated)} now, `;
    const proc = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={50} ascii={false} /></Wide>);
    const frame = plain(proc.lastFrame()!);
    proc.unmount();
    expect(frame).toMatch(new RegExp(`^${now}[\\d.]+ MiB at step ${facts.steps - 1}'s peak$`, "m"));
    expect(frame).toMatch(/^retries 0  OOMs 0  step 20  phase outside/m);
    expect(frame).not.toContain("private pools");
    const seg = render(<Wide columns={200}><SegmentsScreen pm={pm} width={200} height={30} ascii={false} selected={0} /></Wide>);
    const lines = plain(seg.lastFrame()!).split("\n");
    seg.unmount();
    expect(lines[0]).toContain(now);
    expect(lines[1]).toStartWith("private pools (CUDA graphs, torch.cuda.MemPool): not told apart");
  });

});

describe("a snapshot's pool ids", () => {
  test("a segment_pool_id that is not a pair of non-negative integers is an error that names the segment", () => {
    const bad = new Uint8Array(Buffer.from(python("import sys, pickle\nd = pickle.load(sys.stdin.buffer)\nd['segments'][2]['segment_pool_id'] = 'x'\nsys.stdout.write(pickle.dumps(d, protocol=2).hex())", data), "hex"));
    expect(() => summarize(parseSnapshotBytes(bad))).toThrow(SnapshotError);
    expect(() => summarize(parseSnapshotBytes(bad))).toThrow("segments[2].segment_pool_id is not a pair of non-negative integers");
  });
});
