// Issue 41's acceptance on GPU recordings (bench/gpu-parts/forecast.sh: an H200, the caching
// allocator capped by set_per_process_memory_fraction): the forecast made from each ring at batch
// b0 against torch's own figures measured after it, in the facts (facts.json, the script's merged
// file). The recordings are committed in test/fixtures/forecast/ (the script's rings/: NAME.ring.gz,
// NAME.json and facts.json); a check skips, saying so, only where its ring is missing.
//   - GPT-2, ResNet50, GPT-2 with activation checkpointing: the peak forecast at 2b0 and 4b0 within
//     5% of max_memory_allocated() there; the largest batch that fits against what a fresh training
//     does (the script's `one` processes, and a sweep's fresh-allocator trials): never above the
//     boundary where they settle it (the largest that ran its steps, one more raised OOM) and at most
//     one below it, no batch that raised OOM in a fresh process at or below the forecast, and no batch
//     that ran more than one above it (a forecast that names a batch that OOMs is the worse error:
//     the issue's "never claims more than it measured"). Not the sweep's in-process
//     bisection: its optimizer state was made at b0 and its allocator's cache emptied between
//     trials, a layout no training started at that batch has (on the H200 of 2026-11-29 it ran
//     GPT-2 at batch 92, which a fresh process at 92 could not: its second step found 4.11 GiB free
//     in segments in use, none of it in one piece for the 4.41 GiB logits). Where a fresh process
//     raised OOM, the reserve the forecast counts beside the peak there within one batch's memory
//     of what torch said its segments in use held free. Where the forecast reads the first step's
//     reserved (the allocator returns its free segments where it passes the room, and the
//     long-lived memory made after its peak lands in a per-step segment), that within 2% of torch's
//     in each fresh trial's and fresh process's first step that ran, and not below it: read low, it
//     names batches whose first step returns those segments. GPT-2 with checkpointing on the H200:
//     ran 120 to 148 with the logits' segment free of long-lived memory (fresh processes at 148),
//     raised OOM at 149, 150 and 151 in the second step (the first step's reserved passed the cap,
//     the logits' segment was pinned); the forecast must be 147 or 148.
//   - GPT-2 fed eight sequence lengths: the fit's error within 5%, linear in the sequence with sdpa
//     attention and quadratic with eager; the peak at each length within 5% of torch's there.
//   - the keep-logits leak: time to OOM, forecast ten steps after the growth shows, within 10% of
//     the step at which the allocator raised OOM.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { findings } from "../../src/profiler/findings";
import { forecastAt, forecastBasis, movesAt, neededAt, peakAt } from "../../src/profiler/forecast";
import { firstReservedAt } from "../../src/profiler/forecast-reserve";
import { ringRoom as roomOf, withCap } from "../support/forecast-facts";
import { played } from "../support/played";

// GPUMEM_FORECAST_FIXTURES: another folder of them (the script's rings/, on the device, before they are committed).
const DIR = process.env.GPUMEM_FORECAST_FIXTURES || join(import.meta.dir, "..", "fixtures", "forecast");
const FACTS = join(DIR, "facts.json");
const have = (name: string) => existsSync(FACTS) && existsSync(join(DIR, `${name}.ring.gz`));
const why = (name: string) => (have(name) ? "" : ` (skipped: no ${name}.ring.gz or facts.json in ${DIR} yet; bench/gpu-parts/forecast.sh records them)`);

interface Peak {
  max_allocated: number;
  max_reserved?: number;
}
interface Trial {
  batch: number;
  fits: boolean;
  peaks: Peak[];
  /** A fresh trial's allocator as it began. */
  before?: { allocated: number; reserved: number };
}
interface OneFacts {
  model: string;
  batch: number;
  fits: boolean;
  /** torch's OutOfMemoryError, its first line. */
  error?: string;
  /** torch's peaks of each step it ran (the step that raised: up to the OOM). */
  steps?: Peak[];
}
interface RingFacts {
  cap: { cap_bytes: number; device_total: number };
  outside_pytorch: { outside: number } | null;
  oom_step: number | null;
  batch: number;
}
interface Facts {
  rings: Record<string, RingFacts>;
  sweep: {
    models: Record<string, { batches: Record<string, Trial>; largest_fit: number | null; bisection_complete: boolean; fresh?: { trials: Trial[] } }>;
    shapes: Record<string, { batch: number; per_seq: Record<string, Trial> }>;
  };
  one?: Record<string, OneFacts>;
}
const facts = (): Facts => JSON.parse(readFileSync(FACTS, "utf8"));


/** The steady step's peak (the second of a trial's steps) at `batch`, from the sweep. */
const measured = (t: Trial) => t.peaks[t.peaks.length - 1]!.max_allocated;

/** What a training started at each batch did (batch → it ran its steps): the sweep's fresh-allocator
 *  trials, and fresh processes over them (the ground truth: a new process, nothing cached). */
function freshOf(all: Facts, model: string): Map<number, boolean> {
  const fits = new Map<number, boolean>();
  // A trial counts where the allocator held nothing as it began (a new process's state, its context aside).
  for (const t of all.sweep.models[model]?.fresh?.trials ?? []) if (!t.before || t.before.allocated === 0) fits.set(t.batch, t.fits);
  for (const o of Object.values(all.one ?? {})) if (o.model === model) fits.set(o.batch, o.fits);
  return fits;
}

/** The largest batch that ran with one more measured raising OOM, or null where none is. */
function boundaryOf(fits: Map<number, boolean>): number | null {
  let b: number | null = null;
  for (const [n, ok] of fits) if (ok && fits.get(n + 1) === false && (b === null || n > b)) b = n;
  return b;
}


for (const name of ["gpt2", "resnet50", "gpt2-ckpt"]) {
  test.skipIf(!have(name))(`${name}: the peak at 2 and 4 times the batch within 5% of torch's, the largest batch that fits never above a fresh training's boundary and at most one below, where measured${why(name)}`, async () => {
    const all = facts();
    const f = all.rings[name]!;
    const sweep = all.sweep.models[name]!;
    const b = withCap(forecastBasis(await played(join(DIR, `${name}.ring.gz`)))!, f);
    expect(b.batch).toBe(f.batch);
    expect(b.limit_bytes).toBe(f.cap.cap_bytes);
    for (const k of [2, 4]) {
      const t = sweep.batches[String(k * f.batch)]!;
      expect(t.fits).toBe(true);
      const err = Math.abs(peakAt(b, k * f.batch) - measured(t)) / measured(t);
      expect(err).toBeLessThan(0.05);
    }
    const fc = forecastAt(b, roomOf(f));
    expect(fc.max_batch).toBeGreaterThan(4 * f.batch);
    const fresh = freshOf(all, name);
    // Every fresh result on the forecast's side: a batch that ran is at most one above the forecast
    // (one batch short allowed), a batch that raised OOM above it (never named as fitting).
    for (const [n, ok] of fresh) expect([n, ok ? n <= fc.max_batch! + 1 : n > fc.max_batch!]).toEqual([n, true]);
    // Where a fresh process raised OOM, torch said what its segments in use held free then ("and
    // 4.11 GiB is reserved by PyTorch but unallocated"): the reserve the forecast counts beside the
    // peak at that batch is that within one batch's memory (what one more batch needs).
    for (const o of Object.values(all.one ?? {})) {
      const said = o.model === name && !o.fits && o.error ? /and ([\d.]+) (GiB|MiB) is reserved by PyTo/.exec(o.error) : null;
      if (!said) continue;
      const torchFree = Number(said[1]) * 2 ** (said[2] === "GiB" ? 30 : 20);
      const reserve = neededAt(b, o.batch, true, fc.room_bytes) - peakAt(b, o.batch);
      expect(Math.abs(reserve - torchFree)).toBeLessThan(neededAt(b, o.batch + 1, true, fc.room_bytes) - neededAt(b, o.batch, true, fc.room_bytes));
    }
    // Whether the allocator returns its free segments in the first step (and the long-lived memory
    // made after its peak lands in a per-step segment) turns on that step's reserved at its peak: where
    // the forecast reads it, within 2% of torch's max_memory_reserved in each fresh trial's first step
    // that ran (GPT-2 checkpointed at 120 to 148 on the H200: 19.4 to 23.9 GiB), and not below it.
    const ran = [...(sweep.fresh?.trials ?? []).filter((t) => !t.before || t.before.allocated === 0), ...Object.values(all.one ?? {}).filter((o) => o.model === name).map((o) => ({ batch: o.batch, fits: o.fits, peaks: o.steps ?? [] }))];
    for (const t of ran) {
      if (!t.fits) continue;
      const first = firstReservedAt(b.reserve, t.batch / f.batch, peakAt(b, t.batch), b.peak_bytes);
      if (first === null) continue;
      const torchFirst = t.peaks[0]!.max_reserved!;
      expect([t.batch, Math.abs(first - torchFirst) / torchFirst < 0.02, first >= torchFirst]).toEqual([t.batch, true, true]);
    }
    const boundary = boundaryOf(fresh);
    if (boundary !== null) expect([boundary - 1, boundary]).toContain(fc.max_batch!);
    else console.log(`${name}: forecast ${fc.max_batch} (${fc.max_batch_unstranded ?? fc.max_batch} where long-lived memory lies elsewhere); no fresh boundary measured (${[...fresh].map(([n, ok]) => `${n} ${ok ? "ran" : "OOM"}`).join(", ") || "no fresh run"}): within one unchecked`);
  });
}

test.skipIf(!have("gpt2-ckpt"))(`gpt2-ckpt: the logits' segment holds AdamW's state at batch 16 as the ring shows; larger, the forward's freed segments hold it, until the first step's peak passes the cap and the allocator returns them${why("gpt2-ckpt")}`, async () => {
  const all = facts();
  const f = all.rings["gpt2-ckpt"]!;
  const model = await played(join(DIR, "gpt2-ckpt.ring.gz"));
  const b = withCap(forecastBasis(model)!, f);
  const room = f.cap.cap_bytes;
  // At 16 the ring's second step made one more logits-sized segment (its first one's held the state).
  const steps = model.devices[0]!.steps;
  expect(steps[1]!.reserved_at_peak - steps[0]!.reserved_at_peak).toBeGreaterThanOrEqual(b.reserve.stranded.segment_bytes);
  expect(b.reserve.spare.length).toBeGreaterThan(0);
  expect(movesAt(b, f.batch, room)).toBe(false);
  // Every fresh trial and process that ran from 120 on: the state elsewhere (torch's reserved the same at its second step as at its first).
  const ones = Object.values(all.one ?? {}).filter((o) => o.model === "gpt2-ckpt").map((o) => ({ batch: o.batch, fits: o.fits, peaks: o.steps ?? [] }));
  for (const t of [...all.sweep.models["gpt2-ckpt"]!.fresh!.trials, ...ones]) {
    if (!t.fits) continue;
    expect(Math.abs(t.peaks[1]!.max_reserved! - t.peaks[0]!.max_reserved!)).toBeLessThan(b.reserve.stranded.segment_bytes / 100);
    expect([t.batch, movesAt(b, t.batch, room)]).toEqual([t.batch, true]);
  }
  const fc = forecastAt(b, roomOf(f));
  const n = fc.max_batch!;
  expect(movesAt(b, n, room)).toBe(true);
  expect(firstReservedAt(b.reserve, (n + 1) / f.batch, peakAt(b, n + 1), b.peak_bytes)!).toBeGreaterThan(room);
  // Its checkpoints (8 MiB at 16, in the allocator's shared 20 MiB segments) pass 10 MiB there: the
  // first step's reserved counts one more freed MLP segment, and the words say so.
  expect(fc.words).toContain(`from batch ${n + 1} the first step's peak with them free (with one more of them: blocks under the allocator's 10 MiB at this batch pass it there and are cut from them) passes the room`);
});

for (const [name, shape] of [
  ["gpt2-varlen", "linear"],
  ["gpt2-varlen-eager", "quadratic"],
] as const) {
  test.skipIf(!have(name))(`${name}: the fit over the steps' lengths within 5%, ${shape} in the sequence, each length's peak within 5% of torch's${why(name)}`, async () => {
    const all = facts();
    const b = forecastBasis(await played(join(DIR, `${name}.ring.gz`)))!;
    expect(b.fit).not.toBeNull();
    expect(b.fit!.max_error).toBeLessThan(0.05);
    expect(b.fit!.in_seq).toBe(shape);
    const shapes = all.sweep.shapes[name.endsWith("eager") ? "eager" : "sdpa"]!;
    for (const [seq, t] of Object.entries(shapes.per_seq)) {
      if (!t.fits) continue;
      expect(Math.abs(peakAt(b, shapes.batch, Number(seq)) - measured(t)) / measured(t)).toBeLessThan(0.05);
    }
  });
}

test.skipIf(!have("gpt2-leak"))(`gpt2-leak: time to OOM, forecast ten steps after the growth shows, within 10% of the step that raised OOM${why("gpt2-leak")}`, async () => {
  const f = facts().rings["gpt2-leak"]!;
  expect(f.oom_step).not.toBeNull();
  const model = await played(join(DIR, "gpt2-leak.ring.gz"), { untilSteps: 10 });
  const growth = findings(model).find((x) => x.id === "growth");
  expect(growth).toBeTruthy();
  const b = withCap(forecastBasis(model)!, f);
  const fc = forecastAt(b, roomOf(f), growth!.numbers.growth_per_step_bytes as number);
  // The script counts steps from 1 (the step that raised is f.oom_step); the model from 0.
  const oomStep = f.oom_step! - 1;
  expect(Math.abs(fc.time_to_oom!.oom_step - oomStep) / oomStep).toBeLessThanOrEqual(0.1);
});
