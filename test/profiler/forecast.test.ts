// Will it fit (src/profiler/forecast.ts) on the committed GPU recordings: issue 36's rings (an H200,
// test/fixtures/exact/: a transformers GPT-2 at 16x256, a torchvision ResNet50 at 8, the GPT-2 with
// expandable segments, under FSDP2, and attached after 73 steps with its seed) against torch's own
// figures in their facts. Each step's peak is torch's max_memory_allocated(); what the forecast
// calls fixed is exactly what torch holds between steps (memory_allocated() after the last step:
// parameters, optimizer state, workspaces), and the rest of the peak scales with the batch.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { forecastAt, forecastBasis, peakAt } from "../../src/profiler/forecast";
import { played } from "../support/played";

const EXACT = join(import.meta.dir, "..", "fixtures", "exact");

const facts = (name: string) => JSON.parse(readFileSync(join(EXACT, `${name}.facts.json`), "utf8"));

for (const name of ["gpt2", "resnet50", "expandable", "fsdp2", "attach-gpt2"]) {
  const ring = join(EXACT, `${name}.ring.gz`);
  test.skipIf(!existsSync(ring))(`${name}: the peak is torch's, the fixed part what torch holds between steps, the rest scales`, async () => {
    const f = facts(name);
    const b = forecastBasis(await played(ring))!;
    expect(b.steps).toBe(3); // four steps recorded (after the attach, for attach-gpt2): all but the first (warm-up)
    expect(b.peak_bytes).toBe(f.max_memory_allocated);
    expect(b.fixed_bytes).toBe(f.memory_allocated);
    expect(b.fixed_bytes + b.scaling_bytes).toBe(b.peak_bytes);
    expect([b.split_at, b.peak_phase]).toEqual(["peak", "backward"]);
    // The allocator's slack at the peak: reserved there less the peak, within torch's reserved peak.
    expect(b.slack_bytes).toBeGreaterThan(0);
    expect(b.peak_bytes + b.slack_bytes).toBeLessThanOrEqual(f.max_memory_reserved);
    // No shape said (the rings predate the agent's INPUT records): multiples of this batch.
    expect(b.batch).toBeNull();
    const fc = forecastAt(b, { total_bytes: null, outside_bytes: null });
    expect(fc.at).toEqual([2, 4].map((k) => ({ batch: k, peak_bytes: Math.round(f.memory_allocated + k * (f.max_memory_allocated - f.memory_allocated)) })));
    expect([fc.room_bytes, fc.max_batch]).toEqual([null, null]); // no room known: nothing claimed to fit
    expect(fc.words).toContain("at this batch (its shape not said)");
    expect(fc.basis).toContain("from 3 steps at one input shape");
  });
}

test("in a room: the largest multiple of the batch whose peak and slack fit it, and one more does not", async () => {
  const f = facts("gpt2");
  const b = forecastBasis(await played(join(EXACT, "gpt2.ring.gz")))!;
  const room = 24 * 2 ** 30;
  const fc = forecastAt(b, { total_bytes: room + 2 ** 29, outside_bytes: 2 ** 29 });
  expect(fc.room_bytes).toBe(room);
  const n = fc.max_batch!;
  expect(f.memory_allocated + n * (f.max_memory_allocated - f.memory_allocated) + b.slack_bytes).toBeLessThanOrEqual(room);
  expect(peakAt(b, n + 1) + b.slack_bytes).toBeGreaterThan(room);
  expect(fc.words).toMatch(new RegExp(`fits up to ${n}x this batch \\(\\d+\\.\\d of 24\\.5 GiB with 512\\.00 MiB outside PyTorch and this step's allocator slack, 531\\.37 MiB\\)`));
});

test("an attach whose memory from before it is not named (no seed): no forecast, rather than all of the peak called scaling", async () => {
  const model = await played(join(EXACT, "attach-gpt2.ring.gz"), { seed: false });
  expect(model.devices[0]!.steps.length).toBeGreaterThan(2);
  expect(forecastBasis(model)).toBeNull();
});
