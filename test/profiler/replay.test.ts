// Replay: pacing by the recorded clock, the header's final totals applied at the end, lost
// records, and errors for bad options.
import { describe, expect, test } from "bun:test";
import type { EventBatch, RingHeader } from "../../src/ffi/events";
import { batchSource, replay, type EventSource, type ReplayLine } from "../../src/profiler";
import { ringHeader } from "../support/ring-header";
import { MiB, Trace } from "./trace";

/** A closed ring's header after three allocations of `allocated` bytes in all. */
function header(allocated: number): RingHeader {
  return ringHeader([{ allocated, active: allocated, peak_allocated: allocated, peak_active: allocated, n_alloc: 3 }], { pid: 99, closed: true, write_index: 3 });
}

async function collect(gen: AsyncGenerator<ReplayLine>): Promise<ReplayLine[]> {
  const out: ReplayLine[] = [];
  for await (const l of gen) out.push(l);
  return out;
}

/** Three allocations one second apart (recorded time). */
function threeSeconds(): Trace {
  const tr = new Trace();
  tr.dt = 1_000_000;
  return tr.alloc(0x100000, 1 * MiB).alloc(0x200000, 1 * MiB).alloc(0x300000, 1 * MiB);
}

describe("replay", () => {
  test("states show the replayed moment; the recorded header's totals arrive at the end", async () => {
    const tr = threeSeconds();
    const lines = await collect(replay(batchSource(header(3 * MiB), [tr.batch()]), { state_every_us: 1_000_000 }));
    const states = lines.filter((l) => l.type === "state");
    expect(states.map((s) => s.summary.devices[0]!.allocated_bytes)).toEqual([1 * MiB, 2 * MiB, 3 * MiB]);
    expect(states.map((s) => s.summary.devices[0]!.totals_source)).toEqual(["blocks", "blocks", "hook"]);
    const final = lines.at(-1)!;
    expect(final.type).toBe("final");
    expect(final.summary.pid).toBe(99);
    // this header counts no requested bytes: the blocks disagree with it at the end, and it is shown
    expect(final.summary.devices[0]!.totals_source).toBe("hook");
    // every line survives a JSON round trip unchanged (plain objects, no NaN, no typed arrays)
    for (const l of lines) expect(JSON.parse(JSON.stringify(l))).toEqual(l);
  });

  test("--speed paces states by the recorded clock", async () => {
    let now = 0;
    const slept: number[] = [];
    const clock = { now_us: () => now, sleep: async (us: number) => void (slept.push(us), (now += us)) };
    await collect(replay(batchSource(header(3 * MiB), [threeSeconds().batch()]), { speed: 4, clock, state_every_us: 1_000_000 }));
    // two seconds of recording between the first event and the last state boundary, at 4×
    expect(slept.reduce((a, b) => a + b, 0)).toBe(500_000);
    expect(() => replay(batchSource(header(0), []), { speed: 2 }).next()).toThrow(/needs a clock/);
    expect(() => replay(batchSource(header(0), []), { speed: -1 }).next()).toThrow(/--speed must be a positive number/);
  });

  test("records lost by the reader mark block detail partial; totals come from the header", async () => {
    const tr = threeSeconds();
    const batches = [tr.batch(0, 1), tr.batch(2, 3)];
    let k = 0;
    const src: EventSource = {
      header: () => header(3 * MiB),
      read(out: EventBatch) {
        const b = batches[k];
        if (!b) return { count: (out.count = 0), lost: 0 };
        for (const c of ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range"] as const)
          (out[c] as Float64Array).set(b[c] as Float64Array);
        out.count = b.count;
        return { count: b.count, lost: k++ === 1 ? 1 : 0 };
      },
    };
    const final = (await collect(replay(src))).at(-1)!;
    expect(final.lost_records).toBe(1);
    const d = final.summary.devices[0]!;
    expect(d.allocated_bytes).toBe(3 * MiB);
    expect(d.partial).toBe(true);
    expect(d.unaccounted_bytes).toBe(1 * MiB);
    expect(final.type === "final" && final.findings.map((f) => f.id)).toContain("partial");
  });
});
