// Issue 36's comparison: a ring recorded with sync points at every hook (GPUMEM_TUI_MARKS=hooks:
// each device's SYNC record, then its SYNC_PEAKS, from one reading of torch's statistics) replayed
// through the monitor's model, and the model's figures compared with torch's at every sync point:
// allocated, reserved (the SYNC), active, peak allocated and peak reserved (the SYNC_PEAKS).
//
// A sync is tied to a point of its device's stream by its count of alloc and free_requested
// records (the hook counts them as it writes them): the records are merged from the lanes by time,
// so a sync written on another thread can land a few records away from its point. Its figures are
// compared with the model's right after the model has taken as many of that device's counted
// records (the first sync of a device sets the offset between the two counts, as the model's own
// consistency check does), and again after its SYNC_PEAKS where none of the device's events came
// between (the two records are one reading; after an attach the model learns torch's peak from
// before it from the first such pair: that one point is its source, every later one a comparison);
// a sync whose point the stream had already passed is "misplaced", one read while an event raced it
// (SYNC_UNSURE) is "unsure": neither is compared.
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch, type EventBatch } from "../../src/ffi/events";
import { POINT_NAMES } from "../../src/ffi/wire";
import { createModel, type ProfilerModel } from "../../src/profiler";
import { recordFields } from "../../src/system/manifest";

export const FIELDS = ["allocated", "reserved", "active", "peakAllocated", "peakReserved"] as const;
export type Field = (typeof FIELDS)[number];
export type Figures = Partial<Record<Field, number>>;

export interface SyncCompare {
  /** The sync record's index in the merged stream. */
  index: number;
  device: number;
  step: number;
  phase: number;
  /** Where the agent wrote it (POINT_NAMES; null: a sync without SYNC_PEAKS, at a step boundary, attach or exit). */
  point: string | null;
  events: number;
  state: "compared" | "unsure" | "misplaced" | "never reached";
  torch: Figures;
  model: Figures | null;
  /** The fields whose figures differ (compared syncs only). */
  differ: Field[];
  /** The device's counted records fed when it was compared (its SYNC_PEAKS, read with it, is
   *  taken in before the figures are final where none came between). */
  countedAt: number;
}

export interface ExactReport {
  syncs: number;
  /** Syncs with their SYNC_PEAKS (written at a hook). */
  points: number;
  compared: number;
  unsure: number;
  misplaced: number;
  /** Compared syncs where any figure differs. */
  differences: number;
  byField: Record<Field, number>;
  /** Records the model counted as invalid (a reader that does not know SYNC_PEAKS would count them). */
  invalidRecords: number;
  marks: SyncCompare[];
}

const COUNTED = new Set<number>([ACTION.alloc, ACTION.free_requested, ACTION.free]);

/** The model's figures of `dev` now (zeros before the device has any record). */
function figuresOf(model: ProfilerModel, dev: number): Figures {
  const d = model.device(dev);
  return {
    allocated: d?.allocated ?? 0,
    reserved: d?.reserved ?? 0,
    active: d?.active ?? 0,
    peakAllocated: d?.peakAllocated ?? 0,
    peakReserved: d?.peakReserved ?? 0,
  };
}

/** Every record of the recording, in batches as its reader gives them (and the records lost before each). */
function readAll(source: { read(b: EventBatch): { count: number; lost: number } }): { batch: EventBatch; lost: number }[] {
  const out: { batch: EventBatch; lost: number }[] = [];
  for (;;) {
    const batch = newEventBatch(65_536);
    const { count, lost } = source.read(batch);
    batch.count = count;
    if (count === 0 && lost === 0) return out;
    out.push({ batch, lost });
  }
}

/** Replays the ring at `path` (.ring or .ring.gz, its manifest and seed beside it) and compares
 *  the model with torch at every sync. */
export function compareAtSyncs(path: string): ExactReport {
  const rec = openRingRecording(path);
  try {
    const model = createModel();
    model.setRecordFields(recordFields(rec.manifest));
    // the seed beside it (NAME.seed.json), read as the replay reads it (recording.ts)
    if (rec.seed) model.setSeed(rec.seed);
    return compareBatches(model, readAll(rec.source));
  } finally {
    rec.close();
  }
}

/** compareAtSyncs on records already read: fed one at a time, each sync compared at its point. */
export function compareBatches(model: ProfilerModel, batches: { batch: EventBatch; lost: number }[]): ExactReport {
  const marks: SyncCompare[] = [];
  const counted = new Map<number, number>(); // device → its counted records fed
  const offset = new Map<number, number>(); // device → the hook's count less the model's (NaN after lost records)
  const waiting = new Map<number, SyncCompare[]>(); // device → syncs whose point is ahead
  const last = new Map<number, SyncCompare>(); // device → its last sync (the next SYNC_PEAKS is its)
  let index = 0;
  const compareNow = (m: SyncCompare) => {
    m.model = figuresOf(model, m.device);
    m.state = "compared";
    m.countedAt = counted.get(m.device) ?? 0;
  };
  const reached = (dev: number) => {
    const w = waiting.get(dev);
    if (!w) return;
    const target = (counted.get(dev) ?? 0) + (offset.get(dev) ?? 0);
    while (w.length > 0 && w[0]!.events <= target) compareNow(w.shift()!);
  };
  for (const { batch, lost } of batches) {
    if (lost > 0) {
      model.ingest(batch, lost, 0, 0);
      for (const dev of offset.keys()) offset.set(dev, Number.NaN);
    }
    for (let i = 0; i < batch.count; i++, index++) {
      const a = batch.action[i]!;
      const dev = batch.device[i]!;
      model.ingest(batch, 0, i, i + 1);
      if (COUNTED.has(a) && dev >= 0) {
        counted.set(dev, (counted.get(dev) ?? 0) + 1);
        reached(dev);
      } else if (a === ACTION.sync) {
        const events = batch.extra[i]!;
        const m: SyncCompare = {
          index, device: dev, step: batch.step[i]!, phase: batch.phase[i]!, point: null, events, state: "unsure",
          torch: { allocated: batch.address[i]!, reserved: batch.size[i]! }, model: null, differ: [], countedAt: -1,
        };
        marks.push(m);
        last.set(dev, m);
        if (!(events < 2 ** 63)) continue;
        const have = counted.get(dev) ?? 0;
        const off = offset.get(dev);
        if (off === undefined || off !== off) {
          offset.set(dev, events - have);
          compareNow(m);
        } else if (events === have + off) compareNow(m);
        else if (events < have + off) m.state = "misplaced";
        else {
          m.state = "never reached";
          waiting.set(dev, [...(waiting.get(dev) ?? []), m]);
        }
      } else if (a === ACTION.sync_peaks) {
        const m = last.get(dev);
        if (!m) continue;
        m.point = POINT_NAMES[batch.extra[i]!] ?? `point ${batch.extra[i]}`;
        m.torch.peakAllocated = batch.address[i]!;
        m.torch.peakReserved = batch.size[i]!;
        m.torch.active = batch.stream[i]!;
        // A point is one reading of torch's statistics written as two records (SYNC, then
        // SYNC_PEAKS): the model's figures there are those after both, where none of the
        // device's events came between (the model may take the peaks from before an attach from
        // the first of them: DeviceState.peaksFromTorch).
        if (m.state === "compared" && m.countedAt === (counted.get(dev) ?? 0)) m.model = figuresOf(model, dev);
      }
    }
  }
  const byField = Object.fromEntries(FIELDS.map((f) => [f, 0])) as Record<Field, number>;
  let differences = 0;
  for (const m of marks) {
    if (m.state !== "compared" || !m.model) continue;
    for (const f of FIELDS) if (m.torch[f] !== undefined && m.torch[f] !== m.model[f]) m.differ.push(f);
    for (const f of m.differ) byField[f]++;
    if (m.differ.length > 0) differences++;
  }
  return {
    syncs: marks.length,
    points: marks.filter((m) => m.point !== null).length,
    compared: marks.filter((m) => m.state === "compared").length,
    unsure: marks.filter((m) => m.state === "unsure").length,
    misplaced: marks.filter((m) => m.state === "misplaced").length,
    differences,
    byField,
    invalidRecords: model.invalidRecords,
    marks,
  };
}

/** The report in a few lines: the counts, and the first syncs that differ (for a failing test). */
export function describeReport(r: ExactReport, most = 5): string {
  const head = `${r.syncs} syncs (${r.points} at hooks): ${r.compared} compared, ${r.unsure} unsure, ${r.misplaced} misplaced; ${r.differences} differ ${JSON.stringify(r.byField)}`;
  const first = r.marks.filter((m) => m.differ.length > 0).slice(0, most);
  return [head, ...first.map((m) => `  #${m.index} device ${m.device} step ${m.step} ${m.point ?? "sync"}: ${m.differ.map((f) => `${f} torch ${m.torch[f]} model ${m.model![f]}`).join(", ")}`)].join("\n");
}
