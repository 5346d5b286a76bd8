// The allocator's settings string (PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF, the manifest's
// alloc_conf) read into the rules snapshots use (block-sizes.ts): one reading for rings and snapshots.
import { describe, expect, test } from "bun:test";
import { roundSize, rulesOf, settingsOfAllocConf } from "../../src/profiler/block-sizes";

const MiB = 1024 * 1024;

describe("alloc_conf", () => {
  test("unset: torch's defaults", () => {
    expect(rulesOf(settingsOfAllocConf(null), false)).toMatchObject({ expandable: false, maxSplitSize: Infinity, powerTwo: false });
  });

  test("expandable segments, max_split_size in MB, a division count for every interval", () => {
    const r = rulesOf(settingsOfAllocConf("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:4"), false);
    expect(r.expandable).toBe(true);
    expect(r.maxSplitSize).toBe(128 * MiB);
    expect(r.divisions.every((d) => d === 4)).toBe(true);
    // 1.2 MiB in quarters of the 1..2 MiB interval: 1.25 MiB
    expect(roundSize(1.2 * MiB, r)).toBe(1.25 * MiB);
  });

  test("a list of divisions: the first holds below it, `>` above the last; commas inside brackets are the list's", () => {
    const r = rulesOf(settingsOfAllocConf("roundup_power2_divisions:[2:1,4:8,>:2],expandable_segments:False"), false);
    expect(r.expandable).toBe(false);
    expect(r.divisions.slice(0, 5)).toEqual([1, 1, 8, 2, 2]);
  });

  test("what it cannot read leaves torch's default", () => {
    expect(rulesOf(settingsOfAllocConf("max_split_size_mb:lots,garbage,roundup_power2_divisions:x"), false)).toMatchObject({ maxSplitSize: Infinity, powerTwo: false });
  });
});
