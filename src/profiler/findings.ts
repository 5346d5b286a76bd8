// Detectors: what is wrong, in words a user can act on, with the numbers as evidence. Each reads
// the model's per-step records and live state; none walks more than the live blocks once, and the
// model's kept records once where it names lines (the holes' last occupants, a phase's callers):
// only for a finding raised, never per record.

import { PHASE, PHASE_NAMES } from "../ffi/events";
import { CATEGORIES, CAT_UNRESOLVED, N_CAT, survivorCategory } from "./categories";
import type { DeviceState } from "./device";
import type { OomIncident } from "./oom";
import { formatBytes, formatShare, inPhaseOfStep, unallocatedWords } from "../words";
import type { ProfilerModel } from "./model";
import { deviceSummary } from "./queries";
import { poolTotals } from "./pools";
import { segmentMap } from "./segment-map";
import { expandableSegments, fragmentedOom, unallocatedEvidence, unallocatedTitle, unallocatedView } from "./unallocated";
import type { StepRecord } from "./steps";
import { growthSite } from "./growth-site";
import { holeLines } from "./hole-lines";
import { tailCaller } from "./phase-callers";
import { linesInWords, type LineBytes, type LineSplit } from "./line-bytes";
import { frameLabel } from "./user-frame";
import type { DocumentFinding, FindingId } from "../system/schema";
import { ledgerRows, ledgerWords, libraryName } from "../system/ledger-rows";

export type { FindingId };

/** A finding as the document has it (id, severity, title, evidence, numbers: src/system/schema.ts),
 *  and the CUDA device it is of. */
export type Finding = DocumentFinding & { device: number };
type FindingLine = NonNullable<DocumentFinding["lines"]>[number];

/** The user's line of `stack` (user-frame.ts), or null: no stack, no frames yet, library code only. */
function lineOf(m: ProfilerModel, stack: number): { label: string; short: string } | null {
  const s = m.stacks;
  const k = stack && s ? s.userFrame(stack) : -1;
  if (k < 0) return null;
  const f = s!.frames(stack)[k]!;
  return { label: frameLabel(f), short: frameLabel(f, true) };
}

/** How many lines a finding lists as holding memory. */
const LINES_LISTED = 3;

/** The lines of a split that a finding lists with `role`, each with its bytes. */
const linesAs = (role: FindingLine["role"], ls: readonly LineBytes[]): FindingLine[] => ls.map((l) => ({ role, at: l.label, bytes: l.bytes, blocks: l.blocks }));

/** " Lines holding most then: a (X), b (Y); Z of blocks whose line is not known." (nothing without lines) */
function holdingWords(what: string, s: LineSplit | null): string {
  if (!s || s.lines.length === 0) return "";
  const unknown = s.unknown_bytes > 0 ? `; ${formatBytes(s.unknown_bytes)} in blocks whose line is not known` : "";
  return ` ${what}: ${linesInWords(s.lines, formatBytes)}${unknown}.`;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Thresholds, exported so a test or a view can say what they are. */
export const THRESHOLDS = {
  /** Step boundaries the growth detector needs (after warm-up), and the share of them that must grow. */
  growthMinIntervals: 3,
  growthPositiveShare: 0.75,
  /** Steps at the start whose boundaries are warm-up (optimizer state, cuBLAS workspaces). */
  warmupSteps: 1,
  /** Steps whose backward must see gradients from earlier steps, and their share of the steps with a backward. */
  gradientsMinSteps: 2,
  gradientsShare: 0.5,
  /** A forgotten zero_grad keeps every gradient; a step counts only where what its backward met
   *  is at least this share of the gradient bytes alive as the step began. A small block that
   *  merely outlives a backward (activation checkpointing's recompute leaves one, taken for a
   *  gradient by its lifetime) is not a kept gradient. */
  gradientsHeldShare: 0.5,
  /**
   * Reserved but unallocated memory (words.ts: UNALLOCATED) is a finding only where it costs
   * something. Alone it costs nothing: it is the cache keeping blocks for the next step's peak,
   * and between steps it is all the activation memory (the demo's sound GPT-2 training: 14.45 GiB
   * between steps, 2.23 GiB at its peak). It costs
   * - allocation retries (torch's num_alloc_retries: cudaMalloc failed, the allocator freed its
   *   cache, synchronized the device and tried again) beyond the one torch makes before every
   *   OOM it raises (the recorded OOM runs: 1 retry, 1 OOM): at least unallocatedRetries;
   * - an OOM whose request the unallocated bytes would have held, in no free block that large;
   * - memory idle at the last settled step's peak: at least unallocatedAtPeakMinBytes,
   *   unallocatedAtPeakShare of reserved then and unallocatedAtPeakRequests times the step's
   *   largest block, more than any of its requests could use when it needed the most. (The demo:
   *   2.23 GiB, 12% of reserved, 1.46 times its largest block; every committed recording stays
   *   below at least two of the three.)
   */
  unallocatedRetries: 1,
  unallocatedAtPeakMinBytes: 1 * GiB,
  unallocatedAtPeakShare: 0.2,
  unallocatedAtPeakRequests: 4,
  /** NVML used − reserved worth a line of its own. */
  nonPytorchMinBytes: 1 * GiB,
};

function phaseName(p: number): string {
  return PHASE_NAMES[p] ?? `phase#${p}`;
}

function where(m: ProfilerModel, step: number, phase: number, range: number): string {
  const r = m.rangeName(range);
  return `${inPhaseOfStep(phaseName(phase), step)}${r ? ` (range ${r})` : ""}`;
}

/** The `n` largest categories of `live`, in words; blocks of the phase that was running (not yet
 *  classified) count as what they become past it (`phase`), as the Tensors screen counts them
 *  (queries.ts: categories), so that a finding and the screen call the same bytes by one name. */
function topCategories(live: Float64Array, n: number, phase: number): string {
  const bytes = Float64Array.from(live);
  bytes[survivorCategory(phase)]! += bytes[CAT_UNRESOLVED]!;
  bytes[CAT_UNRESOLVED] = 0;
  let total = 0;
  for (let c = 0; c < N_CAT; c++) total += bytes[c]!;
  if (total <= 0) return "";
  const parts: Array<[string, number]> = [];
  for (let c = 0; c < N_CAT; c++) {
    if (bytes[c]! <= 0) continue;
    parts.push([CATEGORIES[c]!.replace("_", " "), bytes[c]!]);
  }
  parts.sort((a, b) => b[1] - a[1]);
  return parts
    .slice(0, n)
    .map(([k, v]) => `${formatShare(v / total)} ${k}`)
    .join(", ");
}

function oomFinding(m: ProfilerModel, d: DeviceState, o: OomIncident): Finding {
  const unallocated = o.reserved_bytes - o.allocated_bytes;
  const fragmented = fragmentedOom(o);
  const nonPytorch = o.nvml_used_bytes === null ? null : o.nvml_used_bytes - o.reserved_bytes;
  const comp = topCategories(o.live_by_category_bytes, 3, o.phase);
  // The line that asked (its stack is the request's own), and the lines holding most then.
  const asked = lineOf(m, o.stack);
  const holding = m.stacks && o.live_lines ? o.live_lines.split(LINES_LISTED) : null;
  let evidence =
    `Out of memory on device ${d.device} ${where(m, o.step, o.phase, o.range)}: ` +
    `asked for ${formatBytes(o.request_bytes)}${asked ? ` at ${asked.label}` : ""} with ${formatBytes(o.device_free_bytes)} free on the device; ` +
    `PyTorch held ${formatBytes(o.allocated_bytes)} allocated of ${formatBytes(o.reserved_bytes)} reserved ` +
    `(largest free block in reserved memory ${formatBytes(o.largest_free_block_bytes)}).`;
  if (comp) evidence += ` Live memory then: ${comp}.`;
  evidence += holdingWords("Lines holding most then", holding);
  if (nonPytorch !== null) evidence += ` Outside PyTorch (NVML used − reserved): ${formatBytes(nonPytorch)}.`;
  if (fragmented)
    evidence +=
      ` The request would fit in the ${unallocatedWords(unallocated)}, but no free block is that large: ` +
      `fragmentation (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces it).`;
  return {
    id: "oom",
    severity: "error",
    device: d.device,
    title: `CUDA out of memory ${where(m, o.step, o.phase, o.range)}${asked ? `, asked at ${asked.short}` : ""}`,
    evidence,
    ...(m.stacks ? { lines: [...(asked ? [{ role: "asked" as const, at: asked.label, bytes: o.request_bytes, blocks: null }] : []), ...linesAs("holding", holding?.lines ?? [])] } : {}),
    numbers: {
      time_us: o.time_us,
      asked_at: asked?.label ?? null,
      holding_unknown_bytes: holding ? holding.unknown_bytes : null,
      step: o.step,
      phase: phaseName(o.phase),
      range: m.rangeName(o.range),
      request_bytes: o.request_bytes,
      device_free_bytes: o.device_free_bytes,
      allocated_bytes: o.allocated_bytes,
      reserved_bytes: o.reserved_bytes,
      active_bytes: o.active_bytes,
      reserved_unallocated_bytes: unallocated,
      largest_free_block_bytes: o.largest_free_block_bytes,
      nvml_used_bytes: o.nvml_used_bytes,
      non_pytorch_bytes: nonPytorch,
      ...liveByCategory(o.live_by_category_bytes),
    },
  };
}

/** live_<category>_bytes for each category (blocks of the phase that was running count as not yet classified). */
function liveByCategory(live: Float64Array): Record<string, number> {
  const out: Record<string, number> = {};
  for (let c = 0; c < CATEGORIES.length; c++) out[`live_${CATEGORIES[c]}_bytes`] = live[c]!;
  out.live_unclassified_bytes = live[CAT_UNRESOLVED]!;
  return out;
}

/** Steps after warm-up (complete ones only). */
function settledSteps(d: DeviceState): StepRecord[] {
  const done = d.steps;
  if (done.length === 0) return [];
  const first = done[0]!.step;
  return done.filter((r) => r.step >= first + THRESHOLDS.warmupSteps);
}

function growthFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const s = settledSteps(d);
  if (s.length < THRESHOLDS.growthMinIntervals + 1) return null;
  // torch's own allocated at each boundary (sync records) where every step has it: the blocks'
  // sizes come from requests, and a large block the allocator did not split holds up to 1 MiB more.
  const exact = s.every((r) => r.torchAllocated === r.torchAllocated);
  const heldAt = (r: StepRecord) => (exact ? r.torchAllocated : r.allocated_at_end);
  // The trend is read from torch's requested bytes where the syncs carry them: what the program
  // asked for, without the allocator's rounding. Allocated jumps by up to a MiB per large block as
  // blocks are reused, several times a leak's growth per step (a GPT-2 keeping 1.53 MiB a step:
  // allocated at the boundary fell by up to 3.47 MiB at 175 of 1,516 boundaries, requested never).
  const byRequest = exact && s.every((r) => r.torchRequested === r.torchRequested);
  const trendAt = (r: StepRecord) => (byRequest ? r.torchRequested : heldAt(r));
  let positive = 0;
  let maxDrop = 0;
  for (let k = 1; k < s.length; k++) {
    const delta = trendAt(s[k]!) - trendAt(s[k - 1]!);
    if (delta > 0) positive++;
    else if (-delta > maxDrop) maxDrop = -delta;
  }
  const intervals = s.length - 1;
  const first = s[0]!;
  const last = s[s.length - 1]!;
  const nSteps = last.step - first.step;
  const trendGrowth = trendAt(last) - trendAt(first);
  if (trendGrowth <= 0 || nSteps <= 0) return null;
  if (positive / intervals < THRESHOLDS.growthPositiveShare) return null;
  const trendPerStep = trendGrowth / nSteps;
  // A drop as large as the growth of a whole step means the memory comes and goes: no leak.
  if (maxDrop >= trendPerStep) return null;
  // What a user reads in torch's memory_allocated(): the held bytes' own growth, rounding included
  // (over a window too short for the rounding to even out it can read ≤ 0: the requests' then).
  const heldGrowth = heldAt(last) - heldAt(first);
  const perStep = heldGrowth > 0 ? heldGrowth / nSteps : trendPerStep;
  // Which category and which range grow: the median of their per-boundary growth, so that one
  // reclassification (blocks named, or found to be parameters) does not pass for a trend.
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  let topCat = 0;
  let catGrowth = -Infinity;
  for (let c = 0; c < N_CAT; c++) {
    const g = median(s.slice(1).map((r, k) => r.liveByCatAtEnd[c]! - s[k]!.liveByCatAtEnd[c]!));
    if (g > catGrowth) {
      catGrowth = g;
      topCat = c;
    }
  }
  const ids = new Set<number>();
  for (const r of s) for (const [id] of r.liveByRangeAtEnd) ids.add(id);
  const maps = s.map((r) => new Map(r.liveByRangeAtEnd));
  let topRange = -1;
  let topRangeGrowth = 0;
  for (const id of ids) {
    const g = median(maps.slice(1).map((mp, k) => (mp.get(id) ?? 0) - (maps[k]!.get(id) ?? 0)));
    if (g > topRangeGrowth) {
      topRange = id;
      topRangeGrowth = g;
    }
  }
  const rangeName = topRange > 0 ? m.rangeName(topRange) : null;
  let evidence =
    `Memory held at step boundaries grows by ${formatBytes(perStep)} per step over steps ${first.step}..${last.step} ` +
    `(${exact ? "torch's memory_allocated()" : "allocated"} at the boundary from ${formatBytes(heldAt(first))} to ${formatBytes(heldAt(last))}; ` +
    (byRequest ? `the program's requested bytes grew by ${formatBytes(trendPerStep)} per step, at ` : "") +
    `${positive} of ${intervals} boundaries${byRequest ? "" : " grew"}).`;
  evidence += ` The growth is in ${CATEGORIES[topCat]!.replace("_", " ")} memory (+${formatBytes(catGrowth)} per step)`;
  const site = growthSite(m, d, first.step, topCat, last.step);
  evidence += rangeName ? `, allocated in range ${rangeName} (+${formatBytes(topRangeGrowth)} per step)` : "";
  if (site) evidence += `${rangeName ? ";" : ","} ${site.words}`;
  evidence += ".";
  evidence +=
    " Something keeps tensors of every step alive: e.g. a running loss that keeps its autograd graph " +
    "(total_loss += loss instead of loss.item()), or outputs appended to a list.";
  return {
    id: "growth",
    severity: "warning",
    device: d.device,
    title: `memory held at step boundaries grows by ${formatBytes(perStep)} per step${site?.frameShort ? `, allocated at ${site.frameShort}` : ""}`,
    evidence,
    ...(m.stacks ? { lines: site?.frame ? [{ role: "grows" as const, at: site.frame, bytes: site.frameBytes, blocks: site.frameBlocks }] : [] } : {}),
    numbers: {
      first_step: first.step,
      last_step: last.step,
      first_held_bytes: heldAt(first),
      last_held_bytes: heldAt(last),
      held_from: exact ? "torch" : "blocks",
      growth_per_step_bytes: Math.round(perStep),
      requested_growth_per_step_bytes: byRequest ? Math.round(trendPerStep) : null,
      growing_boundaries: positive,
      boundaries: intervals,
      category: CATEGORIES[topCat]!,
      category_growth_per_step_bytes: Math.round(catGrowth),
      range: rangeName,
      range_growth_per_step_bytes: topRange > 0 ? Math.round(topRangeGrowth) : null,
      site_phase: site?.phase ?? null,
      site_range: site?.range ?? null,
      site_bytes: site?.bytes ?? null,
      site_blocks: site?.blocks ?? null,
      site_frame: site?.frame ?? null,
    },
  };
}

function gradientsFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const withBackward = [...d.steps, d.cur].filter((r) => r.gradHeldBytes === r.gradHeldBytes);
  // The first step's backward can never see earlier gradients: leave it out, of the share and of
  // the count alike (so the count is never above the steps it is out of).
  const counted = withBackward.length > 1 ? withBackward.slice(1) : withBackward;
  // Held against what zero_grad would free and against the model's gradient set alike: a few small
  // blocks that outlive every step (CUDA graphs' capture makes two) are not the gradients kept.
  const held = counted.filter((r) => r.gradHeldBytes > 0 && r.gradHeldBytes >= THRESHOLDS.gradientsHeldShare * Math.max(r.gradCarriedBytes, r.gradSetBytes || 0));
  if (held.length < THRESHOLDS.gradientsMinSteps) return null;
  const eligible = counted.length;
  if (held.length / eligible < THRESHOLDS.gradientsShare) return null;
  const last = held[held.length - 1]!;
  let maxHeld = 0;
  for (const r of held) if (r.gradHeldBytes > maxHeld) maxHeld = r.gradHeldBytes;
  // Where the program calls backward and the optimizer's step (the phase marks' stacks): the
  // gradients themselves come from autograd's engine, which has no Python frames.
  const caller = (phase: number) => {
    for (const stack of m.callers.of(phase)) {
      const l = lineOf(m, stack);
      if (l) return l;
    }
    // No mark carried a stack (a snapshot's trace): the line the phase's own allocations name.
    const label = tailCaller(m, phase);
    return label ? { label, short: label.replace(/^.*\//, "") } : null;
  };
  const backward = caller(PHASE.backward);
  const optimizer = caller(PHASE.optimizer);
  const calls = [backward ? `backward is called at ${backward.label}` : null, optimizer ? `the optimizer's step at ${optimizer.label}` : null].filter(Boolean);
  const evidence =
    `In ${held.length} of ${eligible} steps, gradients from earlier steps were still allocated when backward began ` +
    `(${formatBytes(last.gradHeldBytes)} in ${last.gradHeldBlocks} blocks at step ${last.step}; up to ${formatBytes(maxHeld)}). ` +
    "Each backward then adds into the previous step's gradients: optimizer.zero_grad() is not called every step" +
    (calls.length ? ` (${calls.join(", ")}${optimizer ? ": zero_grad() belongs after it" : ""}). ` : ". ") +
    "(Expected only with zero_grad(set_to_none=False), which keeps gradient memory on purpose, or with deliberate accumulation over steps.)";
  const lines: FindingLine[] = [];
  if (backward) lines.push({ role: "backward", at: backward.label, bytes: null, blocks: null });
  if (optimizer) lines.push({ role: "optimizer", at: optimizer.label, bytes: null, blocks: null });
  return {
    id: "gradients_kept",
    severity: "warning",
    device: d.device,
    title: "gradients kept across steps (zero_grad missing?)",
    evidence,
    ...(m.stacks ? { lines } : {}),
    numbers: {
      steps_with_held_gradients: held.length,
      steps_with_backward: eligible,
      last_step: last.step,
      held_bytes: last.gradHeldBytes,
      held_blocks: last.gradHeldBlocks,
      max_held_bytes: maxHeld,
    },
  };
}

/** Reserved but unallocated memory where it costs something (THRESHOLDS.unallocated*). */
function unallocatedFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const s = deviceSummary(m, d);
  const step = settledSteps(d).at(-1) ?? null;
  // A step whose records were partial has totals that may be off: not measured.
  const u = unallocatedView(m, d, step && !step.partial ? step : null);
  const retries = s.n_retries === null ? 0 : Math.max(0, s.n_retries - s.n_oom);
  const oom = d.ooms.find(fragmentedOom) ?? null;
  const atPeak = u.at_peak_bytes ?? 0;
  const idle =
    atPeak >= THRESHOLDS.unallocatedAtPeakMinBytes &&
    atPeak >= THRESHOLDS.unallocatedAtPeakShare * u.reserved_at_peak_bytes! &&
    atPeak >= THRESHOLDS.unallocatedAtPeakRequests * u.largest_alloc_bytes!;
  const retried = retries >= THRESHOLDS.unallocatedRetries;
  if (!retried && !oom && !idle) return null;
  const map = segmentMap(d);
  // empty_cache() applies only to memory idle at the peak that sits in whole free segments: the
  // allocator empties its cache itself before a retry or an OOM.
  const releasable = map.releasable_bytes - u.private_unallocated_bytes;
  const c = { u, oom, retries: retried ? retries : 0, idle, expandable: expandableSegments(d), emptyCacheBytes: idle && releasable >= THRESHOLDS.unallocatedAtPeakMinBytes ? releasable : null };
  const p = u.private_pools && poolTotals(u.private_pools);
  // The lines whose frees left the holes: each free range's last occupant, as far as the kept records reach.
  const holes = holeLines(m, d, LINES_LISTED);
  return {
    id: "reserved_unallocated",
    severity: oom || retried ? "warning" : "info",
    device: d.device,
    title: unallocatedTitle(c),
    evidence: unallocatedEvidence(c) + holdingWords("The free ranges now were last held by blocks allocated at", holes),
    ...(m.stacks ? { lines: linesAs("freed", holes?.lines ?? []) } : {}),
    numbers: {
      reserved_bytes: s.reserved_bytes,
      allocated_bytes: s.allocated_bytes,
      reserved_unallocated_bytes: u.now_bytes,
      peak_step: u.step,
      peak_allocated_bytes: u.peak_allocated_bytes,
      reserved_at_peak_bytes: u.reserved_at_peak_bytes,
      reserved_unallocated_at_peak_bytes: u.at_peak_bytes,
      largest_alloc_bytes: u.largest_alloc_bytes,
      alloc_retries: retries,
      failed_request_bytes: oom ? oom.request_bytes : null,
      largest_free_block_bytes: map.largest_free_bytes,
      inactive_splits: map.n_inactive_splits,
      inactive_split_bytes: map.inactive_split_bytes,
      releasable_bytes: map.releasable_bytes,
      private_pools_reserved_bytes: p ? p.reserved_bytes : null,
      private_pools_allocated_bytes: p ? p.allocated_bytes : null,
      segments_approximate: map.approximate ? 1 : 0,
    },
  };
}

function nonPytorchFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const s = deviceSummary(m, d);
  if (s.non_pytorch_bytes === null || s.non_pytorch_bytes < THRESHOLDS.nonPytorchMinBytes) return null;
  // The ledger, where the monitor has followed the process's NVML samples: each part named.
  const parts = m.ledger.parts(d.device);
  if (parts !== null) {
    const l = ledgerRows({ nvml_used_bytes: s.nvml_used_bytes!, allocated_bytes: s.allocated_bytes, reserved_bytes: s.reserved_bytes, private_pools: d.privatePools ?? [], parts });
    const row = (kind: string) => l.rows.filter((r) => r.kind === kind);
    return {
      id: "non_pytorch",
      severity: "info",
      device: d.device,
      title: ledgerWords(l),
      evidence:
        `NVML counts ${formatBytes(s.nvml_used_bytes!)} used by this process on device ${d.device}, PyTorch reserves ${formatBytes(s.reserved_bytes)}. ` +
        l.rows.filter((r) => r.kind === "context" || r.kind === "library").map((r) => `${r.name}: ${formatBytes(r.bytes)}${r.note ? ` (${r.note})` : ""}`).join("; ") +
        `; unexplained: ${formatBytes(row("unexplained")[0]!.bytes)} (no library's mark was open when it came).`,
      numbers: {
        nvml_used_bytes: s.nvml_used_bytes,
        reserved_bytes: s.reserved_bytes,
        non_pytorch_bytes: s.non_pytorch_bytes,
        context_bytes: row("context")[0]?.bytes ?? null,
        unexplained_bytes: row("unexplained")[0]!.bytes,
        ...Object.fromEntries(parts.libraries.map((p) => [`${p.library}_bytes`, p.bytes])),
      },
    };
  }
  return {
    id: "non_pytorch",
    severity: "info",
    device: d.device,
    title: `${formatBytes(s.non_pytorch_bytes)} used outside PyTorch's allocator`,
    evidence:
      `NVML counts ${formatBytes(s.nvml_used_bytes!)} used by this process on device ${d.device}, PyTorch reserves ${formatBytes(s.reserved_bytes)}: ` +
      `${formatBytes(s.non_pytorch_bytes)} is the CUDA context, NCCL buffers, cuBLAS/cuDNN workspaces or other libraries.`,
    numbers: { nvml_used_bytes: s.nvml_used_bytes, reserved_bytes: s.reserved_bytes, non_pytorch_bytes: s.non_pytorch_bytes },
  };
}

/** Steps completed within which unmarked growth outside PyTorch is warm-up: kernels loading on
 *  first use, torch.compile compiling (and recompiling for a new shape), CUDA graphs captured. */
const OUTSIDE_WARMUP_STEPS = 3;
/** One jump this large asks for attention even in the warm-up (a library's whole workspace). */
const OUTSIDE_JUMP_WARN_BYTES = 2 ** 30;

/** Memory outside PyTorch that grew with no library's mark open (the ledger's newest jump): a
 *  warning where it keeps growing after the warm-up (two jumps or more past OUTSIDE_WARMUP_STEPS:
 *  a leak outside the allocator) or one jump is a GiB or more; told as info otherwise (a
 *  torch.compile run's first steps grow it by a few hundred MiB, every run alike). */
function outsideJumpFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const parts = m.ledger.parts(d.device);
  const j = parts?.jumps.at(-1);
  if (!j || j.bytes <= 0) return null;
  const lib = j.after.match(/^gpumem:([^:]+)/);
  const after = lib ? `${libraryName(lib[1]!)}'s mark ${j.after}` : j.after;
  const late = parts!.jumps.filter((x, i) => x.bytes > 0 && (parts!.jump_steps[i] ?? 0) > OUTSIDE_WARMUP_STEPS).length;
  const warn = late >= 2 || parts!.jumps.some((x) => x.bytes >= OUTSIDE_JUMP_WARN_BYTES);
  return {
    id: "outside_jump",
    severity: warn ? "warning" : "info",
    device: d.device,
    title: `${formatBytes(j.bytes)} appeared outside PyTorch after ${after}, with no library's mark open`,
    evidence:
      `Between two samples NVML's used bytes of this process on device ${d.device} grew ${formatBytes(j.bytes)} more than PyTorch's reserved, after ${after}, ` +
      `with no library's mark open: a library allocating on its own (cuBLAS/cuDNN workspaces, Triton kernels, CuPy, TensorRT, a raw cudaMalloc). ` +
      `It counts as unexplained; wrapping the call in torch.profiler.record_function("gpumem:LIBRARY:EVENT") names it in the ledger.` +
      (warn ? (late >= 2 ? ` It grew ${late} times after the first ${OUTSIDE_WARMUP_STEPS} steps: memory outside the allocator that keeps growing.` : "") : ` Within the first ${OUTSIDE_WARMUP_STEPS} steps and under ${formatBytes(OUTSIDE_JUMP_WARN_BYTES)} each (warm-up: kernels loading, compiling, CUDA graphs captured), it is told, not warned of.`),
    numbers: { jump_bytes: j.bytes, time_us: j.time_us, after: j.after, jumps: parts!.jumps.length, jumps_after_warmup: late },
  };
}

function partialFinding(m: ProfilerModel, d: DeviceState): Finding | null {
  const s = deviceSummary(m, d);
  if (!s.partial) return null;
  return {
    id: "partial",
    severity: "info",
    device: d.device,
    title: "block detail is partial",
    evidence: `Block detail on device ${d.device} is partial: ${s.partial_causes.join("; ")}. Totals (${s.totals_source}) stay exact; the agent's names or a snapshot fill the blocks back in.`,
    numbers: {
      lost_records: d.lost,
      unknown_frees: d.unknownFrees,
      before_attach_bytes: s.before_attach_bytes,
      unaccounted_bytes: s.unaccounted_bytes,
      replaced_blocks: d.replacedBlocks,
      resynced_blocks: d.blocks.resynced,
    },
  };
}

const SEVERITY = { error: 0, warning: 1, info: 2 } as const;

/** Every detector on every device, most severe first. */
export function findings(m: ProfilerModel): Finding[] {
  const out: Finding[] = [];
  for (const d of m.devices) {
    for (const o of d.ooms) out.push(oomFinding(m, d, o));
    for (const f of [growthFinding(m, d), gradientsFinding(m, d), unallocatedFinding(m, d), nonPytorchFinding(m, d), outsideJumpFinding(m, d), partialFinding(m, d)])
      if (f) out.push(f);
  }
  out.sort((a, b) => SEVERITY[a.severity] - SEVERITY[b.severity] || a.device - b.device);
  return out;
}

/** A finding once, however often it happened: `count` times, at `steps` (OOMs only). */
export interface FindingGroup extends Finding {
  count: number;
  steps: number[];
}

/**
 * The findings once each, most severe first: OOMs asking for the same bytes in the same phase and
 * range (a retry loop, a sweep that keeps failing) are one finding with their count and steps, the
 * latest one's words and numbers kept.
 */
export function distinctFindings(fs: Finding[]): FindingGroup[] {
  const byKey = new Map<string, FindingGroup>();
  for (const f of fs) {
    const n = f.numbers;
    const key = f.id === "oom" ? `oom/${f.device}/${n.phase}/${n.range}/${n.request_bytes}/${n.asked_at ?? ""}` : `${f.id}/${f.device}/${f.title}`;
    const had = byKey.get(key);
    const steps = f.id === "oom" && typeof n.step === "number" ? [n.step] : [];
    if (!had) byKey.set(key, { ...f, count: 1, steps });
    else byKey.set(key, { ...f, count: had.count + 1, steps: [...had.steps, ...steps] });
  }
  return [...byKey.values()];
}
