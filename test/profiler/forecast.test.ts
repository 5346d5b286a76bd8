// Will it fit (src/profiler/forecast.ts) on the committed GPU recordings: issue 36's rings (an H200,
// test/fixtures/exact/: a transformers GPT-2 at 16x256, a torchvision ResNet50 at 8, the GPT-2 with
// expandable segments, under FSDP2, and attached after 73 steps with its seed) against torch's own
// figures in their facts. Each step's peak is torch's max_memory_allocated(); what the forecast
// calls fixed is exactly what torch holds between steps (memory_allocated() after the last step:
// parameters, optimizer state, workspaces), and the rest of the peak scales with the batch.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { forecastAt, forecastBasis, gradientsMadeAtPeak, neededAt, peakAt } from "../../src/profiler/forecast";
import { reserveAt } from "../../src/profiler/forecast-reserve";
import { played } from "../support/played";

const EXACT = join(import.meta.dir, "..", "fixtures", "exact");

const facts = (name: string) => JSON.parse(readFileSync(join(EXACT, `${name}.facts.json`), "utf8"));

for (const name of ["gpt2", "resnet50", "expandable", "fsdp2", "attach-gpt2"]) {
  const ring = join(EXACT, `${name}.ring.gz`);
  test.skipIf(!existsSync(ring))(`${name}: the peak is torch's, the fixed part what torch holds between steps and the gradients made by the peak, the rest scales`, async () => {
    const f = facts(name);
    const m = await played(ring);
    const b = forecastBasis(m)!;
    expect(b.steps).toBe(3); // four steps recorded (after the attach, for attach-gpt2): all but the first (warm-up)
    expect(b.peak_bytes).toBe(f.max_memory_allocated);
    // The gradients backward made by the peak are the parameters' size, not the batch's: fixed.
    const d = m.devices[0]!;
    const grads = gradientsMadeAtPeak(d, d.steps[d.steps.length - 1]!)!;
    expect(b.fixed_bytes).toBe(f.memory_allocated + grads);
    expect(b.fixed_bytes + b.scaling_bytes).toBe(b.peak_bytes);
    // At forward's own peak none of them exist: there the fixed part is exactly torch's between steps.
    if (grads > 0) expect(b.forward!.fixed_bytes).toBe(f.memory_allocated);
    else expect(b.forward).toBeNull();
    expect([b.split_at, b.peak_phase]).toEqual(["peak", "backward"]);
    // The allocator's slack at the peak: reserved there less the peak, within torch's reserved peak.
    expect(b.slack_bytes).toBeGreaterThan(0);
    expect(b.peak_bytes + b.slack_bytes).toBeLessThanOrEqual(f.max_memory_reserved);
    // No shape said (the rings predate the agent's INPUT records): multiples of this batch.
    expect(b.batch).toBeNull();
    const fc = forecastAt(b, { total_bytes: null, outside_bytes: null });
    const fwd = (k: number) => (b.forward ? b.forward.fixed_bytes + k * b.forward.scaling_bytes : 0);
    expect(fc.at).toEqual([2, 4].map((k) => ({ batch: k, peak_bytes: Math.round(Math.max(fwd(k), b.fixed_bytes + k * (f.max_memory_allocated - b.fixed_bytes))) })));
    expect([fc.room_bytes, fc.max_batch]).toEqual([null, null]); // no room known: nothing claimed to fit
    expect(fc.words).toContain("at this batch (its shape not said)");
    expect(fc.basis).toContain("from 3 steps at one input shape");
  });
}

test("in a room: the largest multiple of the batch whose peak and the allocator's free memory in use fit it, and one more does not", async () => {
  const f = facts("gpt2");
  const b = forecastBasis(await played(join(EXACT, "gpt2.ring.gz")))!;
  // The slack at the peak, parted: whole free segments (returned before an OOM, not counted), the
  // free part of segments in use, and of it one 786 MiB segment made for the logits that AdamW's
  // state (made after the first backward, while only such segments were free) holds: its rest grows
  // with the batch.
  const r = b.reserve;
  expect(r.exact).toBe(true);
  expect(reserveAt(r, 1) + r.released_bytes).toBe(b.slack_bytes);
  expect(b.peak_bytes + b.slack_bytes).toBeLessThanOrEqual(f.max_memory_reserved);
  expect([r.stranded.segments, r.stranded.largest_segment_bytes]).toEqual([1, 786 * 2 ** 20]);
  expect(reserveAt(r, 2) - reserveAt(r, 1)).toBe(r.stranded.segment_bytes); // the segment grows, what lies in it does not
  const room = 24 * 2 ** 30;
  const fc = forecastAt(b, { total_bytes: room + 2 ** 29, outside_bytes: 2 ** 29 });
  expect(fc.room_bytes).toBe(room);
  const n = fc.max_batch!;
  expect(f.memory_allocated + n * (f.max_memory_allocated - f.memory_allocated) + reserveAt(r, n)).toBeLessThanOrEqual(room);
  expect(neededAt(b, n + 1)).toBeGreaterThan(room);
  expect(peakAt(b, n + 1)).toBeLessThan(room); // the peak alone would fit one more: the reserve decides
  // The margin: with that segment as it is now (its long-lived memory elsewhere at that batch), one more.
  expect(fc.max_batch_unstranded).toBe(n + 1);
  expect(fc.words).toMatch(new RegExp(`fits up to ${n}x this batch \\(\\d+\\.\\d of 24\\.5 GiB with 512\\.00 MiB outside PyTorch and \\d+\\.\\d\\d GiB free in the allocator's segments in use at the peak: a 786\\.00 MiB segment made for per-step blocks holds 228\\.32 MiB of long-lived memory: grown with the batch, what lies in it not\\); ${n + 1}x where that memory lies elsewhere`));
});

test("attached after 73 steps (its seed naming what was there): the same allocator reserve and largest batch as the same training recorded from its start", async () => {
  const room = { total_bytes: 24 * 2 ** 30, outside_bytes: 0 };
  const from = forecastBasis(await played(join(EXACT, "gpt2.ring.gz")))!;
  const attached = forecastBasis(await played(join(EXACT, "attach-gpt2.ring.gz")))!;
  // The seed's blocks carry no step: from before the attach, long-lived (AdamW's state in the logits' segment).
  expect(attached.reserve).toEqual(from.reserve);
  expect(attached.reserve.stranded.segments).toBe(1);
  const [a, f] = [forecastAt(attached, room), forecastAt(from, room)];
  expect([a.max_batch, a.max_batch_unstranded]).toEqual([f.max_batch, f.max_batch_unstranded]);
});

test("an attach whose memory from before it is not named (no seed): no forecast, rather than all of the peak called scaling", async () => {
  const model = await played(join(EXACT, "attach-gpt2.ring.gz"), { seed: false });
  expect(model.devices[0]!.steps.length).toBeGreaterThan(2);
  expect(forecastBasis(model)).toBeNull();
});
