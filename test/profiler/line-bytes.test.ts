// Bytes per line (issue 37): what a sampled block stands for (stack-weight.ts), defined once, and
// the sums that use it: unbiased over a stream of mixed sizes sampled as the hook samples, the
// at-peak groups by line adding up to the peak on a ring recorded with stacks.
import { afterAll, describe, expect, test } from "bun:test";
import { atPeak, stepBands } from "../../src/profiler";
import { sampledOut, settle, stackWeight } from "../../src/profiler/stack-weight";
import { stacksTest } from "../support/native";
import { cleanLines, markedAt, modelOfLines, recordLines } from "../support/lines-run";

afterAll(cleanLines);

const MiB = 2 ** 20;
const sampling = { minBytes: MiB, sampleBytes: 512 * 1024 };

describe("what a block with a stack stands for", () => {
  test("at or above the threshold, without sampling, or with torch's stacks (every block has one): its own size", () => {
    expect(stackWeight(MiB, sampling)).toBe(MiB);
    expect(stackWeight(64 * MiB, sampling)).toBe(64 * MiB);
    expect(stackWeight(4096, { minBytes: MiB, sampleBytes: 0 })).toBe(4096);
    expect(stackWeight(4096, null)).toBe(4096);
    expect(stackWeight(4096, undefined)).toBe(4096);
  });

  test("below it: s / (1 - exp(-s/R)), near R for a tiny block, near s for one much larger than R", () => {
    expect(stackWeight(512, sampling)).toBeCloseTo(512 / (1 - Math.exp(-512 / (512 * 1024))), 6);
    expect(stackWeight(512, sampling) / (512 * 1024)).toBeCloseTo(1, 2);
    expect(stackWeight(1000, { minBytes: 1e12, sampleBytes: 10 }) / 1000).toBeCloseTo(1, 9);
  });

  test("a block without a stack may have been sampled out only below the threshold of a sampling recording", () => {
    expect([sampledOut(4096, sampling), sampledOut(MiB, sampling), sampledOut(4096, { minBytes: MiB, sampleBytes: 0 }), sampledOut(4096, null)]).toEqual([true, false, false, false]);
  });

  test("summed over a million allocations of mixed sizes, each kept with the hook's probability, within 1% of the bytes asked for", () => {
    // xorshift: the same stream every run
    let x = 88172645463325252n;
    const rand = () => {
      x ^= x << 13n;
      x &= (1n << 64n) - 1n;
      x ^= x >> 7n;
      x ^= x << 17n;
      x &= (1n << 64n) - 1n;
      return Number(x >> 11n) / 2 ** 53;
    };
    let truth = 0;
    let estimate = 0;
    for (let i = 0; i < 1_000_000; i++) {
      // log-uniform from 512 B to 4 MiB: most allocations small, most bytes in large ones
      const s = Math.round(512 * 2 ** (rand() * 13));
      truth += s;
      const p = s >= sampling.minBytes ? 1 : 1 - Math.exp(-s / sampling.sampleBytes);
      if (rand() < p) estimate += stackWeight(s, sampling);
    }
    expect(Math.abs(estimate / truth - 1)).toBeLessThan(0.01);
  });
});

describe("weighed sums never claim more than there is", () => {
  test("what lines stand for beyond their own blocks comes out of the unsampled bytes, cut in proportion where those are fewer", () => {
    // plenty unsampled: each line gets all it stands for
    expect(settle([512, 1024], [512 * 1024, 2 * 512 * 1024], 4 * MiB)).toEqual({ bytes: [512 * 1024, 1024 * 1024], left: 4 * MiB - (512 * 1024 - 512) - (1024 * 1024 - 1024) });
    // one lucky sample among few small blocks: the excess is cut to the pool, the sum is the bytes there are
    const s = settle([512, 2 * MiB], [512 * 1024, 2 * MiB], 64 * 1024);
    expect(s).toEqual({ bytes: [512 + 64 * 1024, 2 * MiB], left: 0 });
    // nothing to stand for: own bytes only
    expect(settle([512], [512 * 1024], 0)).toEqual({ bytes: [512], left: 0 });
  });
});

describe("the at-peak groups by line", () => {
  stacksTest("a ring recorded with stacks: the kept tensors' line holds its blocks' bytes, and the groups add up to the peak", () => {
    const m = modelOfLines(recordLines("leak"));
    const v = atPeak(m, { device: 0, which: "run", by: "frame" })!;
    const keep = v.groups.find((g) => g.key.startsWith(`${markedAt("keep")} `));
    expect(keep?.bytes).toBe(keep!.blocks * 2 * MiB);
    expect(v.groups.reduce((s, g) => s + g.bytes, 0) + v.more_bytes + v.unseen_bytes).toBe(v.peak_bytes);
  }, 30_000);
});

describe("the Timeline's bands", () => {
  stacksTest("each band of a step says the line that allocated it: the kept tensor of the step its keep line, the step's others theirs", () => {
    const m = modelOfLines(recordLines("leak"));
    const sb = stepBands(m, { device: 0, step: m.devices[0]!.steps.at(-1)!.step, columns: 40, bands: 30 })!;
    const kept = sb.bands.filter((b) => b.size_bytes === 2 * MiB && b.alloc_us !== null);
    expect(kept.length).toBe(1);
    expect(kept[0]!.line).toBe(`${markedAt("keep")} <module>`);
    // a band from before the window has no allocation to read a line from, unless it is still alive
    for (const b of sb.bands) if (b.alloc_us === null && !b.alive_now) expect(b.line).toBeNull();
    expect(sb.bands.some((b) => b.line === `${markedAt("optimizer")} <module>` || b.line === `${markedAt("forward")} <module>`)).toBe(true);
  }, 30_000);
});
