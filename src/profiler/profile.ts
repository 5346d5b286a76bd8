// A PyTorch process in one plain object, for the headless views (`--json`, `run --json`, `serve`):
// the quality of its block detail, where the loop is, the last complete step's breakdown, the
// whole run's peak step, live memory by category, the largest tensors by name, and the findings.
// Every figure comes from the same query the screens call, so a number on screen and in JSON agree.

import { breakdown, stepLine } from "./breakdown";
import type { Profile } from "../system/schema";
import { findings, type Finding } from "./findings";
import type { ProfilerModel } from "./model";
import { atPeak, userFrameLabel } from "./peak-groups";
import { blocks, categories, deviceSummary, pickDevice } from "./queries";
import type { DeviceState } from "./device";
import { unallocatedView } from "./unallocated";
import { liveLineSums } from "./line-bytes";

/** How many lines the document lists as holding live memory (Prometheus exports fewer). */
const LINES_LISTED = 10;

/** Live memory by the user's line, where the model has stacks (line-bytes.ts): a walk of every
 *  live block. */
function liveLines(m: ProfilerModel, d: DeviceState | null) {
  if (!d || !m.stacks) return null;
  const sums = liveLineSums(m, d);
  const s = sums.split(LINES_LISTED);
  return { top: s.lines.map((l) => ({ at: l.label, bytes: l.bytes, blocks: l.blocks })), unknown_bytes: s.unknown_bytes };
}

/** The top groups alive at `step`'s peak, where its blocks are kept. */
function aliveAtPeak(m: ProfilerModel, device: number, step: number) {
  const v = atPeak(m, { device, which: step, by: "name", limit: 10 });
  if (!v) return null;
  return { groups: v.groups.map((g) => ({ label: g.key, category: g.category, bytes: g.bytes, blocks: g.blocks })), other_bytes: v.more_bytes, unseen_bytes: v.unseen_bytes };
}

/** The document's reserved_unallocated: unallocated.ts's figures of `d`. */
function reservedUnallocated(m: ProfilerModel, d: DeviceState): Profile["reserved_unallocated"] {
  const u = unallocatedView(m, d);
  return {
    bytes: u.now_bytes,
    step: u.step,
    at_step_peak_bytes: u.at_peak_bytes,
    largest_alloc_bytes: u.largest_alloc_bytes,
    private_pools: u.private_pools && u.private_pools.map((p) => ({ ...p, pool_id: [...p.pool_id] })),
  };
}

/** The profile of `device` (default: the first with events), or null before any event: the
 *  document's `profile` (its type is the schema's, src/system/schema.ts). `found`: the model's
 *  findings where the caller has them already (every device's; computed here otherwise).
 *  `screens`: the document the screens draw from, which leaves out (null) what no screen reads
 *  from it, each tick, for each process: the peak step's live groups (most of a profile's time) and
 *  live memory by line (a walk of every live block); the Process, Tensors and Lines screens ask the
 *  model themselves. */
export function processProfile(m: ProfilerModel, opts: { device?: number; tensors?: number; found?: readonly Finding[]; screens?: boolean } = {}): Profile | null {
  const d = pickDevice(m, opts.device) ?? pickDevice(m);
  if (!d) return null;
  const dev = d.device;
  const s = deviceSummary(m, d);
  // The finished steps themselves, not steps()' line of each (up to 512 objects a tick): only the
  // peak's line and the last's figure are read.
  const done = d.steps;
  let peakRec = done[0] ?? null;
  for (const r of done) if (r.peak_allocated > peakRec!.peak_allocated) peakRec = r;
  const peak = peakRec && stepLine(d, peakRec, true);
  const b = done.length ? breakdown(m, { device: dev }) : null;
  const cats = categories(m, { device: dev }).categories.filter((c) => c.bytes !== 0 || c.blocks !== 0);
  return {
    device: dev,
    detail: {
      partial: s.partial,
      causes: s.partial_causes,
      lost_records: s.lost_records,
      sync_checks: s.sync.checks,
      sync_disagreed: s.sync.disagreed,
      seed: m.seedStatus && { ...m.seedStatus },
      totals_source: s.totals_source,
      totals_cause: s.totals_cause,
    },
    totals: {
      allocated_bytes: s.allocated_bytes,
      active_bytes: s.active_bytes,
      reserved_bytes: s.reserved_bytes,
      peak_allocated_bytes: s.peak_allocated_bytes,
      peak_note: s.peak_note,
    },
    step: s.step,
    phase: s.phase,
    range: s.range_name,
    steps_complete: done.length,
    last_step: b && {
      step: b.step,
      duration_us: b.duration_us,
      peak_allocated_bytes: b.peak.allocated_bytes,
      peak_phase: b.peak.phase,
      peak_range: b.peak.range_name,
      held_at_end_bytes: b.held_at_end_bytes,
      torch_allocated_at_end_bytes: stepLine(d, done[done.length - 1]!, true).torch_allocated_at_end_bytes,
      phases: b.phases.map((p) => ({
        phase: p.phase,
        alloc_bytes: p.alloc_bytes,
        temporary_bytes: p.temporary_bytes,
        held_at_end_bytes: p.held_at_end_bytes,
        peak_allocated_bytes: p.peak_allocated_bytes,
        share_of_step_peak: p.share_of_step_peak,
      })),
      ranges: b.ranges.map((r) => ({
        name: r.name,
        alloc_bytes: r.alloc_bytes,
        temporary_bytes: r.temporary_bytes,
        held_at_end_bytes: r.held_at_end_bytes,
        peak_allocated_bytes: r.peak_allocated_bytes,
        share_of_step_peak: r.share_of_step_peak,
      })),
    },
    peak_step: peak && { step: peak.step, peak_allocated_bytes: peak.peak_allocated_bytes, peak_phase: peak.peak_phase, alive_at_peak: opts.screens ? null : aliveAtPeak(m, dev, peak.step) },
    reserved_unallocated: reservedUnallocated(m, d),
    categories: cats.map((c) => ({ category: c.category, bytes: c.bytes, blocks: c.blocks })),
    lines: opts.screens ? null : liveLines(m, d),
    largest_tensors: blocks(m, { device: dev, limit: opts.tensors ?? 10, sort: "size" }).blocks.map((x) => ({
      label: x.label,
      name: x.name,
      category: x.category,
      size_bytes: x.size_bytes,
      shape: x.shape,
      dtype: x.dtype,
      phase: x.phase,
      step: x.step,
      range: x.range_name,
      allocated_at: userFrameLabel(m, x.stack),
    })),
    findings: (opts.found ?? findings(m))
      .filter((f) => f.device === dev)
      .map(({ id, severity, title, evidence, numbers, lines }) => ({ id, severity, title, evidence, numbers, ...(lines ? { lines } : {}) })),
  };
}
