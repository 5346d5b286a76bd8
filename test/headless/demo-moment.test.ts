// `--json --demo`'s documents pair each NVML sample with the allocator's figures at that sample's
// recorded moment: stepped through a whole loop of the demo on the recording's own clock (not the
// wall's), NVML never shows less on the GPU than PyTorch has reserved there. (The replay's latest
// figures beside a sample up to a second old did: 1.18 GiB used, 18.46 GiB reserved.)
import { expect, test } from "bun:test";
import { DEMO_RING, readTrack } from "../../src/collect/demo";
import { DemoSampler } from "../../src/headless/demo";
import type { Document } from "../../src/system/schema";
import { steppedClock } from "../support/clock";

test("a whole demo loop, at every replayed state: the NVML figure is never below reserved, the document's allocator figures are those of its sample's moment", async () => {
  const track = readTrack(DEMO_RING)!;
  const clock = steppedClock();
  const docs: Document[] = [];
  let sampler: DemoSampler | null = null;
  sampler = new DemoSampler({ speed: 1, ring: DEMO_RING, clock, onUpdate: () => sampler && docs.push(sampler.tick()) });
  try {
    // The recording's span (6.5 s) and the pause before it starts over, on the stepping clock.
    const span_us = track.samples.at(-1)!.t_us - track.samples[0]!.t_us;
    await clock.advance(span_us + 3e6);
  } finally {
    sampler.close();
  }
  const rows = docs.flatMap((d) => d.processes.filter((p) => p.pytorch).map((p) => ({ p, gpu: d.devices.find((x) => x.index === p.device)! })));
  expect(docs.length).toBeGreaterThan(60); // a state each 100 ms of the 6.5 s recorded
  expect(new Set(rows.map((r) => r.p.used_bytes)).size).toBeGreaterThan(1); // 1.18 GiB, then 19.18 GiB
  expect(rows.length).toBeGreaterThan(55);
  expect(Math.max(...rows.map((r) => r.p.pytorch!.step ?? 0))).toBeGreaterThanOrEqual(67); // to the last sample of the loop
  const below = rows.filter((r) => r.p.used_bytes! < r.p.pytorch!.reserved_bytes || r.gpu.memory_used_bytes! < r.p.pytorch!.reserved_bytes);
  expect(below.map((r) => `${r.p.used_bytes} < ${r.p.pytorch!.reserved_bytes}`)).toEqual([]);
  expect(rows.every((r) => r.p.pytorch!.non_pytorch_bytes! >= 0)).toBe(true);
  // The profile is of the same moment as the figures beside it: one step in one document.
  const split = rows.filter((r) => r.p.pytorch!.profile?.step !== r.p.pytorch!.step);
  expect(split.map((r) => `step ${r.p.pytorch!.step}, profile's ${r.p.pytorch!.profile?.step}`)).toEqual([]);
});
