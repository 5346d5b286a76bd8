// Will it fit: each step's peak split into what is fixed and what scales with the input, the peak
// forecast for other batch sizes, the largest batch that fits in the room there is, and the steps
// left before a growing process runs out of it. Pure: the model's finished steps and the agent's
// input shapes (inputs.ts) in, plain objects out; the room (device total, what is outside PyTorch,
// the allocator's limit) comes from the caller, who knows the device.
//
// The split, per step: what the step itself made and still held at its peak scales with the batch
// (activations and temporaries of forward and backward, and the batch itself), except the
// gradients made in backward and what the optimizer made (their size is the parameters'); what
// earlier steps left (parameters, optimizer state, buffers, workspaces) is fixed. Where steps saw
// different input shapes, the peak is fitted over the steps themselves (least squares in
// batch x sequence, and batch x sequence² where three lengths or more tell a quadratic term apart),
// and the fit's error over those steps is part of the answer. Nothing is forecast from fewer than
// one settled step, and the basis says which figures scale and from how many steps.
//
// The gradients backward made by the peak are the parameters' size: fixed. Where the peak lies in
// backward, forward's own peak (none of those gradients yet, all of the activations) is a second
// line, the higher one at a larger batch where more of it scales (a ResNet's). Beside the peak, a
// batch needs the allocator's free memory it cannot give back when short (forecast-reserve.ts):
// not the whole slack (whole free segments are returned before an OOM), but more than it where a
// segment made for a per-step block holds long-lived memory (its free part grows with the batch),
// unless at that batch segments made for other per-step blocks have grown to hold that memory and
// the first step's reserved leaves them to the allocator (then their free part is what is counted;
// that reserved counts one more of them where blocks under the allocator's 10 MiB large size pass it
// at that batch and are cut from them: forecast-reserve.ts firstReservedAt).

import { PHASE } from "../ffi/events";
import { CAT_ACTIVATION, CAT_GRADIENT, CAT_INPUT, CAT_OTHER, CAT_TEMPORARY } from "./categories";
import type { DeviceState } from "./device";
import { allocatorReserve, firstReservedAt, reserveAt, reserveMovedAt, spareCutAt, spareTakes, type AllocatorReserve } from "./forecast-reserve";
import type { StepInput } from "./inputs";
import type { ProfilerModel } from "./model";
import { pickDevice } from "./queries";
import type { StepRecord } from "./steps";
import { stepPicture } from "./step-pictures";
import { formatBytes } from "../words";

export const FORECAST = {
  /** The first steps kept are warm-up (the model built, the optimizer's state made): left out. */
  warmupSteps: 1,
  /** The latest settled steps a forecast reads. */
  maxSteps: 64,
  /** A quadratic term in the sequence is kept where it takes the linear fit's error down to this share of it or less. */
  quadraticGain: 0.5,
  /** ...and the linear fit's error is at least this (a relative error over the steps). */
  quadraticMinError: 0.02,
  /** At its own batch the split gives back the step's peak within this share, or no forecast is made. */
  selfCheck: 0.01,
  /** Batches forecast beside the largest that fits: these multiples of the current one. */
  multiples: [2, 4] as const,
};

/** One settled step as the forecast reads it. */
export interface ForecastStep {
  step: number;
  batch: number | null;
  seq: number | null;
  peak_bytes: number;
  /** The highest allocated in forward or backward: where the batch's activations are held (the fit's measure). */
  fb_peak_bytes: number;
  /** Of the peak: what scales with the input, and the rest. */
  scaling_bytes: number;
  fixed_bytes: number;
  /** reserved − allocated at the peak: the allocator's slack (its cache and rounding) at that moment. */
  slack_bytes: number;
  /** Of fixed_bytes, the gradients backward made by the peak (they do not exist at forward's peak). */
  grads_made_bytes: number;
  duration_us: number | null;
  /** Where the step's peak lay ("backward"...), and whether the split came from it directly. */
  peak_phase: string;
  split_at: "peak" | "forward_backward_peak";
}

/** The fitted peak over steps of different shapes: peak = intercept + per_token·(batch·seq) + per_token_seq·(batch·seq²). */
export interface ForecastFit {
  intercept_bytes: number;
  per_token_bytes: number;
  per_token_seq_bytes: number;
  /** How the peak grows with the sequence length, from what the steps show (null: one length only). */
  in_seq: "linear" | "quadratic" | null;
  shapes: number;
  steps: number;
  /** The largest |forecast − peak| / peak over the steps fitted, and the root mean square of it. */
  max_error: number;
  rms_error: number;
}

export interface ForecastBasis {
  device: number;
  /** Settled steps read, the latest one's number. */
  steps: number;
  step: number;
  /** The latest step's input (null: the agent said none; forecasts are then in multiples of it). */
  batch: number | null;
  seq: number | null;
  /** The longest sequence seen: the batch that fits is the one that fits at that length. */
  seq_max: number | null;
  peak_bytes: number;
  fixed_bytes: number;
  scaling_bytes: number;
  /** Of scaling_bytes, what an earlier step left at the peak and this one freed (a loop variable's last outputs). */
  carried_bytes: number;
  slack_bytes: number;
  /** The split at forward's own peak, where the step's lies in backward: the gradients made by then
   *  are not there, so more of it scales; at a larger batch this moment can be the higher one. */
  forward: { fixed_bytes: number; scaling_bytes: number } | null;
  /** What of the allocator's reserved memory at the peak counts beside it (forecast-reserve.ts). */
  reserve: AllocatorReserve;
  /** The peak of the optimizer's phase (fixed: it does not hold the batch's activations), or null. */
  optimizer_peak_bytes: number | null;
  split_at: ForecastStep["split_at"];
  peak_phase: string;
  fit: ForecastFit | null;
  /** torch.cuda.set_per_process_memory_fraction's cap on this device, where the agent said one. */
  limit_bytes: number | null;
  step_duration_us: number | null;
  /** What scales and from what, in words. */
  words: string;
}

const PHASE_WORD = ["other", "forward", "backward", "optimizer"];

/** A finished step's split (see the header); `gradsMade`: the gradient bytes the step made and held
 *  at its peak, where its picture tells (gradientsMadeAtPeak). */
export function splitStep(r: StepRecord, input: StepInput | undefined, gradsMadeAtPeak: number | null = null): ForecastStep {
  const by = r.peakByPhase;
  const madeThisStep = by[PHASE.other]! + by[PHASE.forward]! + by[PHASE.backward]! + by[PHASE.optimizer]!;
  // Without the picture: the gradients at the peak less those alive as the step began (an upper
  // bound of what was carried in: zero_grad may have freed them before the peak).
  const carried = r.gradCarriedBytes === r.gradCarriedBytes ? r.gradCarriedBytes : 0;
  const gradsMade = Math.min(by[PHASE.backward]!, gradsMadeAtPeak ?? Math.max(0, r.peakComp[CAT_GRADIENT]! - carried));
  const peak = r.peak_allocated;
  let scaling = madeThisStep - gradsMade - by[PHASE.optimizer]!;
  let splitAt: ForecastStep["split_at"] = "peak";
  const fb = Math.max(r.phPeak[PHASE.forward]!, r.phPeak[PHASE.backward]!);
  if (r.peak_phase !== PHASE.forward && r.peak_phase !== PHASE.backward) {
    // The step's peak lies where the batch's activations are gone (the optimizer's step): what
    // scales is read at forward's or backward's own peak instead, above what the step began with;
    // the gradients made by then count as scaling there (an upper bound of it).
    if (fb > 0) {
      scaling = Math.max(0, fb - r.allocated_at_start);
      splitAt = "forward_backward_peak";
    }
  }
  scaling = Math.max(0, Math.min(scaling, peak));
  return {
    step: r.step,
    batch: input ? input.batch : null,
    seq: input ? input.seq : null,
    peak_bytes: peak,
    fb_peak_bytes: fb > 0 ? fb : peak,
    scaling_bytes: scaling,
    fixed_bytes: (splitAt === "peak" ? peak : fb) - scaling,
    grads_made_bytes: splitAt === "peak" ? gradsMade : 0,
    slack_bytes: Math.max(0, r.reserved_at_peak - peak),
    duration_us: r.end_us === r.end_us && r.start_us === r.start_us ? r.end_us - r.start_us : null,
    peak_phase: PHASE_WORD[r.peak_phase] ?? "other",
    split_at: splitAt,
  };
}

/** Categories whose bytes, left by an earlier step and freed in this one, are per-step data (the
 *  last step's outputs a loop variable held until the next forward returned: they scale with the
 *  batch); parameters, gradients, optimizer state and buffers are fixed wherever they were made. */
const PER_STEP = new Set([CAT_ACTIVATION, CAT_TEMPORARY, CAT_OTHER, CAT_INPUT]);

/** Of the bytes earlier steps left at step `rec`'s peak, those the step freed before its end and
 *  that are per-step data (PER_STEP): from the blocks alive at its peak and at its end, where the
 *  model keeps both pictures (the last few steps); 0 where it does not. */
export function carriedPerStep(d: DeviceState, rec: StepRecord): number {
  // A finished step's pictures do not change: read once (the document and the screens ask often).
  const had = carriedOf.get(d);
  if (had && had.rec === rec) return had.bytes;
  const bytes = carriedBytes(d, rec);
  carriedOf.set(d, { rec, bytes });
  return bytes;
}

const carriedOf = new WeakMap<DeviceState, { rec: StepRecord; bytes: number }>();

function carriedBytes(d: DeviceState, rec: StepRecord): number {
  const peak = stepPicture(d, rec);
  const end = stepPicture(d, rec, true);
  if (!peak || !end) return 0;
  const alive = new Set<number>();
  for (let i = 0; i < end.blocks.n; i++) alive.add(end.blocks.serial[i]!);
  const b = peak.blocks;
  let bytes = 0;
  for (let i = 0; i < b.n; i++) if (b.step[i]! < rec.step && !alive.has(b.serial[i]!) && PER_STEP.has(b.category[i]!)) bytes += b.size[i]!;
  return bytes;
}

/** The gradient bytes step `rec` made and still held at its peak, from its picture (null: none kept). */
export function gradientsMadeAtPeak(d: DeviceState, rec: StepRecord): number | null {
  const had = gradsOf.get(d);
  if (had && had.rec === rec) return had.bytes;
  const bytes = gradientBytes(d, rec);
  gradsOf.set(d, { rec, bytes });
  return bytes;
}

const gradsOf = new WeakMap<DeviceState, { rec: StepRecord; bytes: number | null }>();

function gradientBytes(d: DeviceState, rec: StepRecord): number | null {
  const pic = stepPicture(d, rec);
  if (!pic) return null;
  const b = pic.blocks;
  let bytes = 0;
  for (let i = 0; i < b.n; i++) if (b.step[i] === rec.step && b.category[i] === CAT_GRADIENT) bytes += b.size[i]!;
  return bytes;
}

/** Settled finished steps of `d`, the latest FORECAST.maxSteps. */
function settled(d: DeviceState): readonly StepRecord[] {
  const done = d.steps;
  if (done.length === 0) return [];
  const first = done[0]!.step;
  const s = done.filter((r) => r.step >= first + FORECAST.warmupSteps && !r.partial);
  return s.slice(-FORECAST.maxSteps);
}

/** Least squares of y over the columns of xs (each row: the features), or null where singular. */
function leastSquares(xs: number[][], y: number[]): number[] | null {
  const k = xs[0]!.length;
  const a = Array.from({ length: k }, () => new Array<number>(k + 1).fill(0));
  for (let i = 0; i < xs.length; i++)
    for (let p = 0; p < k; p++) {
      for (let q = 0; q < k; q++) a[p]![q]! += xs[i]![p]! * xs[i]![q]!;
      a[p]![k]! += xs[i]![p]! * y[i]!;
    }
  // Gaussian elimination with partial pivoting (k is 2 or 3).
  for (let c = 0; c < k; c++) {
    let piv = c;
    for (let r = c + 1; r < k; r++) if (Math.abs(a[r]![c]!) > Math.abs(a[piv]![c]!)) piv = r;
    if (Math.abs(a[piv]![c]!) < 1e-12 * Math.max(1, Math.abs(a[c]![c]!))) return null;
    [a[c], a[piv]] = [a[piv]!, a[c]!];
    for (let r = 0; r < k; r++) {
      if (r === c) continue;
      const f = a[r]![c]! / a[c]![c]!;
      for (let q = c; q <= k; q++) a[r]![q]! -= f * a[c]![q]!;
    }
  }
  return a.map((row, i) => row[k]! / row[i]!);
}

/** The sequence factor of a shape: its second dimension, or 1 where it has none. */
const seqOf = (s: { seq: number | null }) => (s.seq && s.seq > 0 ? s.seq : 1);

function errors(pts: ForecastStep[], f: (p: ForecastStep) => number): { max: number; rms: number } {
  let max = 0;
  let sq = 0;
  for (const p of pts) {
    const e = Math.abs(f(p) - p.fb_peak_bytes) / p.fb_peak_bytes;
    if (e > max) max = e;
    sq += e * e;
  }
  return { max, rms: Math.sqrt(sq / pts.length) };
}

/** The forward/backward peak fitted over steps of two shapes or more (null where they show one
 *  shape): the optimizer's own peak does not hold the batch, and is taken beside it (peakAt). */
export function fitShapes(pts: ForecastStep[]): ForecastFit | null {
  const shaped = pts.filter((p) => p.batch !== null && p.batch > 0);
  const shapes = new Set(shaped.map((p) => `${p.batch}x${seqOf(p)}`));
  if (shapes.size < 2) return null;
  const tokens = (p: ForecastStep) => p.batch! * seqOf(p);
  const lin = leastSquares(
    shaped.map((p) => [1, tokens(p)]),
    shaped.map((p) => p.fb_peak_bytes),
  );
  if (!lin) return null;
  const linF = (p: ForecastStep) => lin[0]! + lin[1]! * tokens(p);
  const linE = errors(shaped, linF);
  const seqs = new Set(shaped.map(seqOf));
  let best = { c: [lin[0]!, lin[1]!, 0], e: linE };
  if (seqs.size >= 3) {
    const quad = leastSquares(
      shaped.map((p) => [1, tokens(p), tokens(p) * seqOf(p)]),
      shaped.map((p) => p.fb_peak_bytes),
    );
    if (quad && quad[2]! > 0) {
      const qE = errors(shaped, (p) => quad[0]! + quad[1]! * tokens(p) + quad[2]! * tokens(p) * seqOf(p));
      if (linE.max >= FORECAST.quadraticMinError && qE.max <= linE.max * FORECAST.quadraticGain) best = { c: quad, e: qE };
    }
  }
  return {
    intercept_bytes: best.c[0]!,
    per_token_bytes: best.c[1]!,
    per_token_seq_bytes: best.c[2]!,
    in_seq: seqs.size < 2 ? null : best.c[2]! > 0 ? "quadratic" : "linear",
    shapes: shapes.size,
    steps: shaped.length,
    max_error: best.e.max,
    rms_error: best.e.rms,
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
};

/** What the forecast reads of `device` (default: the first), or null before a settled step. Read
 *  again only where what it is made of changed (a step finished, an input or a limit said): the
 *  document and the screens ask at every tick. */
export function forecastBasis(m: ProfilerModel, device?: number): ForecastBasis | null {
  const d = pickDevice(m, device);
  if (!d) return null;
  // Memory from before an attach that no seed named: what earlier steps left is unknown, and the
  // split would call all of a peak scaling (an attach's seed, or a recording's, names it).
  if (d.consistency.preAttachBytes(d.unknownFreeBytes) > 0) return null;
  // The kept steps only grow at the end and lose their oldest: their count and both ends say which.
  const kept = d.steps;
  const key = [kept.length, kept[0], kept[kept.length - 1], m.inputs, m.inputs.version, d.expandableSegments];
  const had = bases.get(d);
  if (had && had.key.every((k, i) => k === key[i])) return had.basis;
  const basis = readBasis(m, d);
  bases.set(d, { key, basis });
  return basis;
}

const bases = new WeakMap<DeviceState, { key: unknown[]; basis: ForecastBasis | null }>();

function readBasis(m: ProfilerModel, d: DeviceState): ForecastBasis | null {
  const recs = settled(d);
  if (recs.length === 0) return null;
  const lastRec = recs[recs.length - 1]!;
  const pts = recs.map((r) => splitStep(r, m.inputs.at(r.step), r === lastRec ? gradientsMadeAtPeak(d, r) : null));
  // The latest step's split, with what earlier steps left at its peak and it freed (per-step data)
  // moved to the scaling side, where its pictures are kept.
  const carried = pts[pts.length - 1]!.split_at === "peak" ? carriedPerStep(d, lastRec) : 0;
  const last = { ...pts[pts.length - 1]!, scaling_bytes: pts[pts.length - 1]!.scaling_bytes + carried, fixed_bytes: pts[pts.length - 1]!.fixed_bytes - carried };
  // The basis is the latest shape's steps (or all, where the agent said no shape).
  const same = pts.filter((p) => p.batch === last.batch && p.seq === last.seq);
  const fit = fitShapes(pts);
  const durations = pts.map((p) => p.duration_us).filter((x): x is number => x !== null);
  const optPeak = lastRec.phPeak[PHASE.optimizer]!;
  const limit = m.inputs.limits.get(d.device);
  const seqMax = pts.some((p) => p.seq !== null) ? Math.max(...pts.map((p) => p.seq ?? 0)) : null;
  const fwdPeak = lastRec.phPeak[PHASE.forward]!;
  const fwdFixed = last.fixed_bytes - last.grads_made_bytes;
  const forward = last.split_at === "peak" && last.grads_made_bytes > 0 && fwdPeak > fwdFixed ? { fixed_bytes: fwdFixed, scaling_bytes: fwdPeak - fwdFixed } : null;
  const basis: ForecastBasis = {
    device: d.device,
    steps: fit ? fit.steps : same.length,
    step: last.step,
    batch: last.batch,
    seq: last.seq,
    seq_max: seqMax,
    peak_bytes: last.peak_bytes,
    fixed_bytes: last.fixed_bytes,
    scaling_bytes: last.scaling_bytes,
    carried_bytes: carried,
    slack_bytes: last.slack_bytes,
    forward,
    reserve: allocatorReserve(d, lastRec, d.expandableSegments),
    optimizer_peak_bytes: optPeak >= 0 ? optPeak : null,
    split_at: last.split_at,
    peak_phase: last.peak_phase,
    fit,
    limit_bytes: limit && limit > 0 ? limit : null,
    step_duration_us: durations.length ? median(durations) : null,
    words: "",
  };
  // The split must give back the step's own peak at its own batch: where it does not (the peak lies
  // outside forward, backward and the optimizer: CUDA graphs' replays, where no hook marks a
  // phase), what scales is not known, and nothing is forecast.
  if (!fit && Math.abs(peakAt(basis, basis.batch ?? 1, basis.seq) - basis.peak_bytes) > FORECAST.selfCheck * basis.peak_bytes) return null;
  basis.words = basisWords(basis);
  return basis;
}

function basisWords(b: ForecastBasis): string {
  const steps = `${b.steps} step${b.steps === 1 ? "" : "s"}`;
  if (b.fit) {
    const seq = b.fit.in_seq === null ? "" : `, ${b.fit.in_seq} in the sequence length`;
    const err = b.fit.max_error < 0.001 ? "under 0.1%" : `at most ${(b.fit.max_error * 100).toFixed(1)}%`;
    return `the peak fitted over ${steps} of ${b.fit.shapes} input shapes${seq} (error ${err} over them)`;
  }
  const where = b.split_at === "peak" ? `at the ${b.peak_phase} peak` : "at the forward/backward peak (the step's own peak lies in the optimizer)";
  const carried = b.carried_bytes > 0 ? `, and the ${formatBytes(b.carried_bytes)} the last step left there and this one freed (its outputs, still held)` : "";
  return (
    `activations and temporaries made by forward and backward scale with the batch${carried}, the rest is fixed ` +
    `(parameters, gradients, optimizer state, buffers and what earlier steps left), ${where}, from ${steps} at one input shape`
  );
}

/** The forecast peak at batch `n` (at sequence length `seq`, default the longest seen). */
export function peakAt(b: ForecastBasis, n: number, seq: number | null = b.seq_max): number {
  const opt = b.optimizer_peak_bytes ?? 0;
  if (b.fit && b.batch !== null) {
    const s = seq && seq > 0 ? seq : 1;
    return Math.max(opt, b.fit.intercept_bytes + b.fit.per_token_bytes * n * s + b.fit.per_token_seq_bytes * n * s * s);
  }
  const base = b.batch && b.batch > 0 ? b.batch : 1; // no shape said: n is a multiple of this step's batch
  const fwd = b.forward ? b.forward.fixed_bytes + (b.forward.scaling_bytes * n) / base : 0;
  return Math.max(opt, fwd, b.fixed_bytes + (b.scaling_bytes * n) / base);
}

/** Batch `n` (at length `seq`) over this step's input: what per-step memory grows by. */
function ratioOf(b: ForecastBasis, n: number, seq: number | null = b.seq_max): number {
  const base = b.batch && b.batch > 0 ? b.batch : 1;
  const s = b.fit && seq && seq > 0 && b.seq && b.seq > 0 ? seq / b.seq : 1;
  return (n * s) / base;
}

/** Whether at batch `n` the long-lived blocks that lie in segments made for per-step blocks now go
 *  to spare segments instead (forecast-reserve.ts): these hold them at that batch, and the first
 *  step's peak with them free fits `room` (else the allocator returns them to make it). */
export function movesAt(b: ForecastBasis, n: number, room: number): boolean {
  const r = ratioOf(b, n);
  if (!spareTakes(b.reserve, r)) return false;
  const first = firstReservedAt(b.reserve, r, peakAt(b, n), b.peak_bytes);
  return first !== null && first <= room;
}

/** What batch `n` needs of the room: its forecast peak and the allocator's free memory it cannot
 *  give back there (forecast-reserve.ts); `stranded` false: the segments made for per-step blocks
 *  that hold long-lived memory stay as they are now (that memory placed elsewhere at that batch).
 *  With `room`, the layout the allocator takes at that batch (movesAt); without it, this one's. */
export function neededAt(b: ForecastBasis, n: number, stranded = true, room: number | null = null): number {
  if (stranded && room !== null && movesAt(b, n, room)) return peakAt(b, n) + reserveMovedAt(b.reserve, ratioOf(b, n));
  return peakAt(b, n) + reserveAt(b.reserve, stranded ? ratioOf(b, n) : 1);
}

/** The room the allocator has on the device. */
export interface ForecastRoom {
  /** The device's memory (NVML's total), null where unknown. */
  total_bytes: number | null;
  /** What the GPU holds outside this process's allocator, null where unknown. */
  outside_bytes: number | null;
  /** Of it, what other processes and the driver hold (null where not told apart). */
  others_bytes?: number | null;
}

export interface Forecast {
  device: number;
  step: number;
  steps: number;
  batch: number | null;
  seq: number | null;
  peak_bytes: number;
  fixed_bytes: number;
  scaling_bytes: number;
  slack_bytes: number;
  fit: ForecastFit | null;
  /** The peak forecast at other batches (multiples of this one). */
  at: Array<{ batch: number; peak_bytes: number }>;
  /** What the allocator may reserve: the limit, else the device's total less what is outside PyTorch. */
  room_bytes: number | null;
  total_bytes: number | null;
  outside_bytes: number | null;
  others_bytes: number | null;
  limit_bytes: number | null;
  /** The allocator's free memory counted beside the peak at this batch (forecast-reserve.ts). */
  reserve_bytes: number;
  /** The largest batch whose forecast peak and the allocator's free memory it cannot give back there
   *  fit the room (null: no room known, or the peak does not grow with the batch). */
  max_batch: number | null;
  /** Peak and reserve at max_batch. */
  max_batch_bytes: number | null;
  /** Where segments made for per-step blocks hold long-lived memory at the peak: the largest batch if
   *  that memory is placed elsewhere at that batch (they stay as now) — the forecast's margin; else null. */
  max_batch_unstranded: number | null;
  /** Where memory held at step boundaries grows: the steps (and seconds) until the step's peak no longer fits. */
  time_to_oom: { growth_per_step_bytes: number; steps: number; seconds: number | null; oom_step: number } | null;
  basis: string;
  words: string;
}

const GiB = 2 ** 30;
/** Memory of other processes and the driver is named in the words from this much on. */
const OTHERS_SAID = 64 * 2 ** 20;
/** "138.1 of 140.4 GiB": both in GiB, as many decimals as the larger needs. */
const ofGiB = (part: number, whole: number) => {
  const d = whole >= 10 * GiB ? 1 : 2;
  return `${(part / GiB).toFixed(d)} of ${(whole / GiB).toFixed(d)} GiB`;
};

/** The room the allocator may reserve in, from the basis's limit and the caller's device figures. */
export function roomOf(b: ForecastBasis, r: ForecastRoom): number | null {
  const free = r.total_bytes === null ? null : r.total_bytes - (r.outside_bytes ?? 0);
  if (b.limit_bytes !== null) return free === null ? b.limit_bytes : Math.min(b.limit_bytes, free);
  return free;
}

/** The largest batch that fits `room` (neededAt), or null; `stranded` false: none pinned (the margin);
 *  `moves` false: pinned as now at every batch (the spare segments left aside). */
export function maxBatch(b: ForecastBasis, room: number, stranded = true, moves = true): number | null {
  if (b.batch === null && !(b.scaling_bytes > 0)) return null;
  if (peakAt(b, 2 * Math.max(1, b.batch ?? 1)) <= peakAt(b, Math.max(1, b.batch ?? 1))) return null; // not growing with the batch
  const pinned = largestFitting((n) => neededAt(b, n, stranded) <= room);
  if (!stranded || !moves || pinned === null) return pinned;
  // Where spare segments take the long-lived blocks (from some batch on, until the first step's peak
  // no longer fits with them free), the batches there fit by that layout's need; each bound grows
  // with the batch, so the largest batch meeting both is searched for, then checked to move.
  const moved = largestFitting((n) => {
    const r = ratioOf(b, n);
    const first = firstReservedAt(b.reserve, r, peakAt(b, n), b.peak_bytes);
    return first !== null && first <= room && peakAt(b, n) + reserveMovedAt(b.reserve, r) <= room;
  });
  return moved !== null && moved > pinned && movesAt(b, moved, room) ? moved : pinned;
}

/** The largest n ≥ 1 with fits(n), where fits holds up to some n and not past it; 0 where 1 does
 *  not fit, null past 2^40. */
function largestFitting(fits: (n: number) => boolean): number | null {
  if (!fits(1)) return 0;
  let lo = 1;
  let hi = 2;
  while (fits(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > 2 ** 40) return null;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Steps until a growing process's step peak (with its slack) passes the room. */
export function timeToOom(b: ForecastBasis, growthPerStep: number, room: number): Forecast["time_to_oom"] {
  if (!(growthPerStep > 0)) return null;
  const left = room - b.peak_bytes - reserveAt(b.reserve, 1);
  const steps = Math.max(1, Math.ceil(left / growthPerStep));
  return {
    growth_per_step_bytes: Math.round(growthPerStep),
    steps,
    seconds: b.step_duration_us === null ? null : (steps * b.step_duration_us) / 1e6,
    oom_step: b.step + steps,
  };
}

/** "OOM in about N steps (M minutes)". */
export function oomWords(t: NonNullable<Forecast["time_to_oom"]>): string {
  const when =
    t.seconds === null ? "" : t.seconds < 1 ? " (under a second)" : t.seconds < 90 ? ` (${Math.round(t.seconds)} s)` : ` (${(t.seconds / 60).toFixed(t.seconds < 600 ? 1 : 0)} minutes)`;
  return `OOM in about ${t.steps} step${t.steps === 1 ? "" : "s"}${when}`;
}

/** Where the spare segments first hold the long-lived memory only above `pinned` + 1: the batches
 *  between fit by neither layout, said so ("" where none). */
function gap(b: ForecastBasis, pinned: number | null, moved: number): string {
  let lo = (pinned ?? 0) + 1;
  if (lo >= moved || spareTakes(b.reserve, ratioOf(b, lo))) return "";
  let hi = moved; // spareTakes holds at moved, not at lo: the first batch where it holds lies in (lo, hi]
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (spareTakes(b.reserve, ratioOf(b, mid))) hi = mid;
    else lo = mid;
  }
  const from = (pinned ?? 0) + 1;
  return `; batch${from === hi - 1 ? ` ${from} does` : `es ${from} to ${hi - 1} do`} not fit: too small for those segments to hold it`;
}

/** The forecast in the room the caller knows; `growthPerStep`: the growth finding's, where one is made. */
export function forecastAt(b: ForecastBasis, r: ForecastRoom, growthPerStep: number | null = null): Forecast {
  const room = roomOf(b, r);
  const n0 = b.batch ?? 1;
  const at = FORECAST.multiples.map((k) => ({ batch: k * n0, peak_bytes: Math.round(peakAt(b, k * n0)) }));
  const max = room === null ? null : maxBatch(b, room);
  const maxBytes = max === null || max === 0 ? null : Math.round(neededAt(b, max, true, room));
  const moved = max !== null && max > 0 && room !== null && movesAt(b, max, room);
  const pinnedMax = moved ? maxBatch(b, room!, true, false) : null;
  const reserve = reserveAt(b.reserve, 1);
  const strands = b.reserve.stranded.segments > 0;
  const unstranded = room === null || !strands ? null : maxBatch(b, room, false);
  const tto = room === null || growthPerStep === null ? null : timeToOom(b, growthPerStep, room);
  let words = b.batch === null ? `peak ${formatBytes(b.peak_bytes)} at this batch (its shape not said)` : `batch ${b.batch}${b.seq ? `x${b.seq}` : ""} now, peak ${formatBytes(b.peak_bytes)}`;
  if (max !== null && room !== null) {
    const unit = b.batch === null ? `${max}x this batch` : `batch ${max}${b.fit && b.seq_max ? ` at length ${b.seq_max}` : ""}`;
    const limited = b.limit_bytes !== null && room === b.limit_bytes;
    const of = limited ? `${ofGiB(maxBytes ?? 0, room)}, the allocator's limit,` : ofGiB((maxBytes ?? 0) + (r.outside_bytes ?? 0), r.total_bytes ?? room);
    const others = (r.others_bytes ?? 0) >= OTHERS_SAID ? `, ${formatBytes(r.others_bytes!)} of it other processes' and the driver's,` : "";
    const outside = r.outside_bytes !== null && !limited ? ` with ${formatBytes(r.outside_bytes)} outside PyTorch${others} and` : " with";
    const free = b.reserve.exact ? `${formatBytes(maxBytes === null ? reserve : maxBytes - peakAt(b, max))} free in the allocator's segments in use at the peak` : `this step's allocator slack, ${formatBytes(b.slack_bytes)}`;
    const s = b.reserve.stranded;
    const held = `${s.segments === 1 ? `a ${formatBytes(s.segment_bytes)} segment` : `${s.segments} segments (${formatBytes(s.segment_bytes)})`} made for per-step blocks ${s.segments === 1 ? "holds" : "hold"} ${formatBytes(s.long_lived_bytes)} of long-lived memory`;
    // Moved: say which layout the figure stands on, and the one that takes over past it.
    const first = moved ? firstReservedAt(b.reserve, ratioOf(b, max + 1), peakAt(b, max + 1), b.peak_bytes) : null;
    const cut = first !== null && spareCutAt(b.reserve, ratioOf(b, max + 1)) > 0 ? ` (with one more of them: blocks under the allocator's 10 MiB at this batch pass it there and are cut from them)` : "";
    const past = first !== null && first > room ? `; from batch ${max + 1} the first step's peak with them free${cut} passes the room, the allocator returns them and the long-lived memory lands in ${s.segments === 1 ? "that segment" : "those segments"} again` : "";
    const why = !strands
      ? ""
      : moved
        ? `: ${held} now; at this batch segments made for other per-step blocks, grown, are the best fit for it and hold it instead${past} (batch ${pinnedMax} at most where it stays there${gap(b, pinnedMax, max)})`
        : `: ${held}: grown with the batch, what lies in ${s.segments === 1 ? "it" : "them"} not`;
    const margin = strands && unstranded !== null && unstranded !== max ? `; ${b.batch === null ? `${unstranded}x` : `batch ${unstranded}`} where that memory lies elsewhere` : "";
    words += max === 0 ? `; batch 1 would not fit (${formatBytes(room)} of room)` : `; fits up to ${unit} (${of}${outside} ${free}${why})${margin}`;
  } else words += `; ${at.map((a, i) => `${b.batch === null ? `${a.batch}x${i ? "" : " the batch"}` : `batch ${a.batch}`}: ${formatBytes(a.peak_bytes)}`).join(", ")}`;
  return {
    device: b.device,
    step: b.step,
    steps: b.steps,
    batch: b.batch,
    seq: b.seq,
    peak_bytes: b.peak_bytes,
    fixed_bytes: Math.round(b.fixed_bytes),
    scaling_bytes: Math.round(b.scaling_bytes),
    slack_bytes: b.slack_bytes,
    fit: b.fit,
    at,
    room_bytes: room,
    total_bytes: r.total_bytes,
    outside_bytes: r.outside_bytes,
    others_bytes: r.others_bytes ?? null,
    limit_bytes: b.limit_bytes,
    reserve_bytes: Math.round(reserve),
    max_batch: max,
    max_batch_bytes: maxBytes,
    max_batch_unstranded: unstranded,
    time_to_oom: tto,
    basis: b.words,
    words,
  };
}
