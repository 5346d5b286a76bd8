// One rule for what each ring action does to a device's totals: GPUMEM_TOTALS_RULE in
// cuda/gpumem_ring.h, generated into src/ffi/wire.ts and agent/gpumem_agent/wire.py. Three
// implementations follow it: the hook's gpumem_totals_apply (C), the monitor's model
// (src/profiler/totals.ts through DeviceState) and the agent's line profiler (gpumem_agent/totals.py).
// Here each runs every committed recording; they must agree with each other and with torch's own
// figures in the recordings' sync records (written by the hook at every step boundary). The block
// figures are the one place they part: the model sizes each block as torch's allocator does (issue
// 36), the hook and the agent by its request.
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ACTION, ACTION_NAMES, newEventBatch, type EventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { FIRST_MARK, TOTALS_RULE } from "../../src/ffi/wire";
import { ROOT, NATIVE_DIR, RING_SOURCES } from "../../src/ffi/build";
import { createModel, type DeviceState } from "../../src/profiler";
import { tmpPath } from "../support/native";

const FIXTURES = join(ROOT, "test", "fixtures");
const RINGS = [
  ...["normal.ring", "hf-gpt2.ring", "oom.ring", "kept-loss-graph.ring", "no-zero-grad.ring", "normal-history.ring", "hf-gpt2-leak.ring.gz"].map((f) => join(FIXTURES, f)),
  ...["expandable.ring", "lapped.ring", "names.ring"].map((f) => join(ROOT, "test", "profiler", "fixtures", "rings", f)),
  join(ROOT, "demo", "demo.ring.gz"),
];
const FIELDS = ["requested", "allocated", "active", "reserved", "peak_allocated", "peak_active", "peak_reserved", "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom"] as const;
type Totals = Record<(typeof FIELDS)[number], number>;
/** A sync record (device, torch's allocated, reserved, requested, the hook's count or −1) with the totals there; or a device's end. */
type Point = { sync: number; torch: [number, number, number, number]; at: Totals } | { end: number; at: Totals };

/** A plain ring file for `path` (a .gz unpacked to a temporary file). */
function plain(path: string): string {
  if (!path.endsWith(".gz")) return path;
  const out = tmpPath(`totals-${path.split("/").pop()!.replace(/\.gz$/, "")}`);
  writeFileSync(out, Bun.gunzipSync(readFileSync(path)));
  return out;
}

const lines = (out: string): Point[] => out.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));

let cTool: string | null = null;
function c(...args: string[]): string {
  if (!cTool) {
    cTool = tmpPath("totals_fold");
    const src = join(ROOT, "test", "support", "totals_fold.c");
    const b = Bun.spawnSync(["cc", "-std=c11", "-O2", "-Wall", "-I", NATIVE_DIR, src, ...RING_SOURCES, "-o", cTool, "-lpthread", "-lm"], { stderr: "pipe" });
    if (b.exitCode !== 0) throw new Error(`building totals_fold.c failed:\n${b.stderr}`);
  }
  const p = Bun.spawnSync([cTool, ...args], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`totals_fold ${args.join(" ")}: ${p.stderr}`);
  return p.stdout.toString();
}

function python(ring: string): Point[] {
  const p = Bun.spawnSync(["python3", join(ROOT, "test", "support", "totals_fold.py"), ring], { env: { ...process.env, PYTHONPATH: join(ROOT, "agent") }, stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`totals_fold.py ${ring}: ${p.stderr}`);
  return lines(p.stdout.toString());
}

const of = (d: DeviceState | undefined): Totals => ({
  requested: d?.requested ?? 0,
  allocated: d?.allocated ?? 0,
  active: d?.active ?? 0,
  reserved: d?.reserved ?? 0,
  peak_allocated: d?.peakAllocated ?? 0,
  peak_active: d?.peakActive ?? 0,
  peak_reserved: d?.peakReserved ?? 0,
  n_alloc: d?.nAlloc ?? 0,
  n_free: d?.nFree ?? 0,
  n_segment_alloc: d?.nSegmentAlloc ?? 0,
  n_segment_free: d?.nSegmentFree ?? 0,
  n_oom: d?.nOom ?? 0,
});

/** The monitor's model over the recording as the monitor reads it (frees folded), stopped at each sync record. */
function model(ring: string): Point[] {
  const r = openRing(ring, { fold: true });
  const m = createModel();
  const out: Point[] = [];
  const b: EventBatch = newEventBatch(4096);
  for (;;) {
    const { count, lost } = r.read(b);
    if (count === 0) break;
    if (lost) m.noteLost(lost);
    let from = 0;
    for (let i = 0; i < count; i++) {
      if (b.action[i] !== ACTION.sync || b.device[i]! < 0) continue;
      m.ingest(b, 0, from, i);
      from = i;
      const d = b.device[i]!;
      const events = b.extra[i]! >= 2 ** 63 ? -1 : b.extra[i]!;
      out.push({ sync: d, torch: [b.address[i]!, b.size[i]!, b.stream[i]!, events], at: of(m.device(d)) });
    }
    m.ingest(b, 0, from, count);
  }
  for (const d of m.devices) if (d.nAlloc + d.nFree + d.nSegmentAlloc + d.nSegmentFree + d.nOom > 0) out.push({ end: d.device, at: of(d) });
  return out;
}

/** Only the named fields of every point. */
const only = (ps: Point[], fields: readonly string[]) => ps.map((p) => ({ ...p, at: Object.fromEntries(fields.map((f) => [f, p.at[f as keyof Totals]])) }));

describe("the totals rule (cuda/gpumem_ring.h GPUMEM_TOTALS_RULE)", () => {
  test("every allocator action has a row, the fold's free included, and no mark has one", () => {
    const allocator = Object.values(ACTION).filter((a) => a < FIRST_MARK).map((a) => String(ACTION_NAMES[a]));
    expect(Object.keys(TOTALS_RULE).sort()).toEqual(allocator.sort());
  });

  test("the reader's free is its free_requested and its free_completed together", () => {
    const { free, free_requested: fr, free_completed: fc } = TOTALS_RULE;
    for (const k of ["requested", "allocated", "active", "reserved"] as const) expect({ [k]: free[k] as number }).toEqual({ [k]: fr[k] + fc[k] });
    expect(free.count).toBe(fr.count);
  });

  test("the hook's gpumem_totals_apply does what each row says (the fold's free never reaches it)", () => {
    const got = JSON.parse(c("rule")) as Record<string, Totals>;
    for (const [name, row] of Object.entries(TOTALS_RULE)) {
      const want: Totals = Object.fromEntries(FIELDS.map((f) => [f, 0])) as Totals;
      if (name !== "free") {
        for (const k of ["requested", "allocated", "active", "reserved"] as const) want[k] = row[k] * 1000;
        for (const k of ["allocated", "active", "reserved"] as const) want[`peak_${k}`] = Math.max(0, want[k]);
        if (row.count) want[row.count] = 1;
      }
      expect({ action: name, totals: got[name.toUpperCase()] }).toEqual({ action: name, totals: want });
    }
  });

  for (const path of RINGS) {
    const name = path.slice(ROOT.length + 1);
    test(`${name}: the hook, the model and the agent agree, and with torch at its sync records`, () => {
      const ring = plain(path);
      const hook = lines(c("fold", ring));
      const agent = python(ring);
      const monitor = model(ring);
      expect(hook.length).toBeGreaterThan(0);
      // The bytes the program asked for, segments and counts: the same in all three, at every sync and at the end.
      const exact = ["requested", "reserved", "peak_reserved", "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom"];
      expect(only(agent, exact)).toEqual(only(hook, exact));
      expect(only(monitor, exact)).toEqual(only(hook, exact));
      // Blocks: the hook takes each request as its block (the agent's copies correct it), so its
      // allocated is its requested; the agent rounds requests (the rule's block). The model keeps
      // torch's blocks (a large block the allocator did not split holds up to 1 MiB more than its
      // request rounded: profiler/large-pool.ts), so it never holds less than the agent, and where
      // a sync ties torch's figures to the records read its allocated is torch's (below).
      for (const p of hook) expect(p.at.allocated).toBe(p.at.requested);
      const blocks = ["allocated", "active", "peak_allocated", "peak_active"] as const;
      if (!name.includes("lapped"))
        for (const [i, p] of monitor.entries()) for (const f of blocks) expect({ i, f, short: p.at[f] < agent[i]!.at[f] }).toEqual({ i, f, short: false });
      // torch's own figures: where the hook's count says the records read are exactly those the
      // figures include, requested and reserved differ from torch's only by what was there before.
      for (const impl of [hook, agent, monitor]) {
        const tied = impl.filter((p): p is Extract<Point, { sync: number }> => "sync" in p && p.torch[3] >= 0);
        const first = new Map<number, { events: number; requested: number; reserved: number }>();
        let compared = 0;
        for (const p of tied) {
          const events = p.torch[3] - (p.at.n_alloc + p.at.n_free);
          // torch's allocated counts blocks: only the model's are torch's (the hook's and the agent's are requests)
          const diff = { events, requested: p.torch[2] - p.at.requested, reserved: p.torch[1] - p.at.reserved, ...(impl === monitor && { allocated: p.torch[0] - p.at.allocated }) };
          const f = first.get(p.sync);
          if (!f) first.set(p.sync, diff);
          else if (f.events === events) {
            expect(diff).toEqual(f);
            compared++;
          }
        }
        if (tied.length > 2) expect(compared).toBeGreaterThan(tied.length / 2);
      }
    });
  }
});
