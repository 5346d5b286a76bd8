// The document's forecast (pytorch.forecast) in the room NVML tells of: an H200's figures from a
// recorded run --json sample (test/fixtures/compile-graphs.run.ndjson.gz: total, free, the process's
// used and its allocator's reserved) and the forecast of issue 36's GPT-2 ring (16x256 on an H200).
// Outside this process's allocator is everything the GPU holds but its reserved (total − free −
// reserved): its own CUDA context, and the driver's and other processes' memory, said apart.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { forecastAt, forecastBasis, neededAt, peakAt } from "../../src/profiler/forecast";
import { pytorchBlock, type AllocatorFigures } from "../../src/system/document";
import { DocumentSchema, PytorchSchema, type Document } from "../../src/system/schema";
import { formatBytes } from "../../src/words";
import { played } from "../support/played";

const FX = join(import.meta.dir, "..", "fixtures");

/** The last sample of the recorded run in which NVML listed the process (its used bytes known). */
function sample(): { doc: Document; pid: number } {
  const lines = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(FX, "compile-graphs.run.ndjson.gz")))).trim().split("\n");
  const doc = DocumentSchema.parse(JSON.parse(lines.findLast((l) => /"pid":558,[^]*"used_bytes":\d/.test(l))!)) as Document;
  return { doc, pid: 558 };
}

test("the room is the GPU's total less all it holds outside this allocator; the driver's and others' said apart", async () => {
  const { doc, pid } = sample();
  const p = doc.processes.find((x) => x.pid === pid && x.used_bytes !== null)!;
  const dev = doc.devices.find((d) => d.index === p.device)!;
  const t = p.pytorch!;
  const b = forecastBasis(await played(join(FX, "exact", "gpt2.ring.gz")))!;
  const figures: AllocatorFigures = { ...t, hook_mode: t.hook_mode, phase: t.phase };
  const block = pytorchBlock(figures, null, p.used_bytes, { profile: null, forecast: (room, growth) => forecastAt(b, room, growth) }, { total_bytes: dev.memory_total_bytes, free_bytes: dev.memory_free_bytes });
  PytorchSchema.parse(block); // as the schema has it
  const fc = block.forecast!;
  const outside = dev.memory_total_bytes! - dev.memory_free_bytes! - t.reserved_bytes;
  const own = p.used_bytes! - t.reserved_bytes;
  expect([fc.total_bytes, fc.outside_bytes, fc.others_bytes]).toEqual([dev.memory_total_bytes, outside, outside - own]);
  expect(fc.room_bytes).toBe(dev.memory_total_bytes! - outside);
  // The largest multiple of the batch whose peak and the allocator's free memory in use fit the room; one more does not.
  expect(neededAt(b, fc.max_batch!)).toBeLessThanOrEqual(fc.room_bytes!);
  expect(neededAt(b, fc.max_batch! + 1)).toBeGreaterThan(fc.room_bytes!);
  const mib = (v: number) => `${(v / 2 ** 20).toFixed(2)} MiB`;
  const gib = (v: number) => `${(v / 2 ** 30).toFixed(2)} GiB`;
  expect(fc.words).toContain(`of 140.4 GiB with ${gib(outside)} outside PyTorch, ${mib(outside - own)} of it other processes' and the driver's, and ${formatBytes(fc.max_batch_bytes! - peakAt(b, fc.max_batch!))} free in the allocator's segments in use at the peak`);
  // No growth finding: no time to OOM.
  expect(fc.time_to_oom).toBeNull();
});

test("without NVML's free bytes: the process's own used − reserved is what is outside", async () => {
  const { doc, pid } = sample();
  const p = doc.processes.find((x) => x.pid === pid && x.used_bytes !== null)!;
  const t = p.pytorch!;
  const b = forecastBasis(await played(join(FX, "exact", "gpt2.ring.gz")))!;
  const block = pytorchBlock({ ...t }, null, p.used_bytes, { profile: null, forecast: (room, growth) => forecastAt(b, room, growth) }, { total_bytes: 150754820096, free_bytes: null });
  expect([block.forecast!.outside_bytes, block.forecast!.others_bytes]).toEqual([p.used_bytes! - t.reserved_bytes, null]);
  // And with no model's forecast, none in the document.
  expect(pytorchBlock({ ...t }, null, p.used_bytes, { profile: null }, null).forecast).toBeNull();
});
