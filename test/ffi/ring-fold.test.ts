// The reader's fold of free pairs (cuda/ring_fold.c): a model fed folded records ends exactly where
// one fed every record does, on every recorded real training; the reads stop at a stream position.
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { openRing, type RingReader } from "../../src/ffi/ring";
import { createModel, finalLine, processProfile, replay, type ProfilerModel } from "../../src/profiler";
import { snapshotFromModel } from "../../src/snapshot/from-model";
import { tmpPath } from "../support/native";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const RINGS = ["normal.ring", "hf-gpt2.ring", "oom.ring", "kept-loss-graph.ring", "no-zero-grad.ring", "normal-history.ring", "hf-gpt2-leak.ring.gz", "../../demo/demo.ring.gz"];

/** A plain ring file for `name` (a .gz unpacked to a temporary file). */
function plain(name: string): string {
  const path = join(FIXTURES, name);
  if (!name.endsWith(".gz")) return path;
  const out = tmpPath(`${name.split("/").pop()!.replace(/\.gz$/, "")}`);
  writeFileSync(out, Bun.gunzipSync(readFileSync(path)));
  return out;
}

async function replayed(r: RingReader): Promise<ProfilerModel> {
  const m = createModel().keepTrace(1_000_000);
  for await (const _ of replay(r, { model: m, batch_size: 4096 })) {
    // states: only the end matters here
  }
  return m;
}

/** Every record's action, read in batches of `size`. */
function actions(r: RingReader, size: number): number[] {
  const b = newEventBatch(size);
  const out: number[] = [];
  for (;;) {
    const { count } = r.read(b);
    if (count === 0) break;
    for (let i = 0; i < count; i++) out.push(b.action[i]!);
  }
  return out;
}

describe("free pairs folded by the reader", () => {
  for (const name of RINGS) {
    test(`${name}: the model ends the same from a third fewer records`, async () => {
      const path = plain(name);
      const raw = await replayed(openRing(path));
      const folded = await replayed(openRing(path, { fold: true }));
      const a = finalLine(raw);
      const b = finalLine(folded);
      // Everything a view or the JSON shows is equal, the events counted included (a pair is two).
      expect(b).toEqual(a);
      for (const d of raw.devices) expect(processProfile(folded, { device: d.device })).toEqual(processProfile(raw, { device: d.device }));
      // A snapshot written from the model has both entries of each pair, in the same order.
      const trace = (m: ProfilerModel) => snapshotFromModel(m).device_traces.map((t) => t.map((e) => `${e.action} ${e.addr} ${e.size} ${e.time_us}`));
      expect(trace(folded)).toEqual(trace(raw));
    });
  }

  test("exactly the free_completed right after its own free_requested are folded", () => {
    const path = plain("hf-gpt2.ring");
    const all = actions(openRing(path), 1 << 17);
    const pairs = all.filter((a, i) => a === ACTION.free_completed && all[i - 1] === ACTION.free_requested).length;
    expect(pairs).toBeGreaterThan(10_000);
    // Batches of 1,000 split some pairs: those stay two records.
    const folded = actions(openRing(path, { fold: true }), 1000);
    expect(folded.length).toBeGreaterThanOrEqual(all.length - pairs);
    expect(folded.length).toBeLessThan(all.length - pairs + all.length / 1000 + 1);
    expect(folded.filter((a) => a === ACTION.free).length).toBe(all.length - folded.length);
    expect(folded.filter((a) => a === ACTION.alloc).length).toBe(all.filter((a) => a === ACTION.alloc).length);
  });

  test("a read stops at the stream position asked for, folded or not", () => {
    const path = plain("hf-gpt2.ring");
    for (const fold of [false, true]) {
      const r = openRing(path, { fold });
      const b = newEventBatch(4096);
      expect(r.read(b, 1234).count).toBeGreaterThan(0);
      while (r.read(b, 1234).count > 0);
      expect(r.next()).toBe(1234);
      expect(r.read(b, 1000).count).toBe(0); // behind already: nothing
      expect(r.read(b).count).toBeGreaterThan(0);
      expect(r.next()).toBeGreaterThan(1234);
    }
  });
});
