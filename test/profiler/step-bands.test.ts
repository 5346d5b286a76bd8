// One step through time (profiler/step-bands.ts) on recordings made on H100/H200 GPUs, held to an
// independent pass over the same records (each block of torch's size: the request rounded, and a
// large one what its segment's chain of blocks gives, profiler/large-pool.ts, the definition the
// model's blocks follow; exact-blocks.test.ts holds those to torch's memory_allocated() at every
// sync record): every band lives exactly from its block's alloc record
// (or the step's start) to its free record (or the step's end); held + bands + rest add up to
// what the records say was allocated at every column's end, to the step record's allocated at the
// step's end and to its peak; the phase strip is the records' own phase stamps. Where the kept
// records do not reach the step's start, the result says so and shows nothing before them.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch, type EventBatch } from "../../src/ffi/events";
import { blocks, createModel, replay, stepBands, timelineSteps, type ProfilerModel, type StepBands } from "../../src/profiler";
import { DEFAULT_RULES, SMALL_BUFFER, SMALL_SIZE } from "../../src/profiler/block-sizes";
import { LargePoolLayout } from "../../src/profiler/large-pool";

const DIR = join(import.meta.dir, "..", "fixtures");
const FIXTURES = ["normal", "hf-gpt2", "kept-loss-graph"] as const;
const MARK = 16; // gpumem_ring.h: actions from here on are marks
const SYNC = 20;
const round = (n: number) => (n <= 0 ? 0 : Math.ceil(n / 512) * 512); // the allocator's 512-byte blocks

/** Every record of a recording as the reader hands them to the model (frees folded). */
function records(name: string): EventBatch {
  const rec = openRingRecording(join(DIR, `${name}.ring`));
  const all = newEventBatch(1 << 20);
  const b = newEventBatch(1 << 16);
  for (;;) {
    const { count } = rec.source.read(b);
    if (count === 0) break;
    for (const k of ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range", "line"] as const) all[k].set(b[k].subarray(0, count), all.count);
    all.count += count;
  }
  rec.close();
  return all;
}

async function model(name: string, traceEntries?: number): Promise<ProfilerModel> {
  const rec = openRingRecording(join(DIR, `${name}.ring`));
  const m = createModel().keepTrace(traceEntries);
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model: m })) {
    // to the end
  }
  rec.close();
  return m;
}

interface Life {
  address: number;
  size: number;
  alloc: number | null;
  free: number | null;
}

/**
 * The independent pass: the records of step `step` (device 0) in stream order (a record belongs to
 * the step the last mark or device record stamped, as the loop's state runs), the blocks alive at
 * its start, and each block's life within it.
 */
function truth(all: EventBatch, step: number, sb: StepBands) {
  const live = new Map<number, Life>();
  let cur = -1;
  let allocated = 0;
  let atStart: Map<number, Life> | null = null;
  const lives: Life[] = [];
  const colUs = Math.max(1, sb.end_us - sb.start_us) / sb.columns;
  const col = (t: number) => Math.max(0, Math.min(sb.columns - 1, Math.floor((t - sb.start_us) / colUs)));
  const atColumnEnd = new Array<number>(sb.columns).fill(NaN);
  let peak = -Infinity;
  let firstTime = NaN;
  // Per column: records by phase (a folded free is two); the phase of the last stamp before it.
  const byPhase = Array.from({ length: sb.columns }, () => [0, 0, 0, 0]);
  const phaseBefore = new Array<number>(sb.columns).fill(-1);
  let phaseNow = -1;
  let lastCol = -1;
  // torch's block of each large request: the free block it takes whole where no more than 1 MiB would remain
  const chains = new LargePoolLayout(DEFAULT_RULES);
  for (let i = 0; i < all.count; i++) {
    const a = all.action[i]!;
    const mark = a >= MARK;
    if (!mark && all.device[i] !== 0) continue;
    if (all.step[i]! > cur) cur = all.step[i]!;
    const t = all.time_us[i]!;
    if (cur === step && atStart === null) {
      atStart = new Map(live);
      peak = allocated;
      firstTime = t;
    }
    if (cur > step) break;
    const inStep = cur === step;
    if (inStep) {
      const c = col(t);
      // The step's first record sets the phase its first column is in.
      if (lastCol === -1 && !(mark && a === SYNC)) phaseNow = all.phase[i]!;
      for (let k = lastCol + 1; k <= c; k++) phaseBefore[k] = phaseNow;
      for (let k = Math.max(0, lastCol); k < c; k++) atColumnEnd[k] = allocated;
      lastCol = Math.max(lastCol, c);
      if (!mark) byPhase[c]![all.phase[i]!]! += a === ACTION.free ? 2 : 1;
    }
    if (!(mark && a === SYNC)) phaseNow = all.phase[i]!;
    if (mark) continue;
    const large = round(all.size[i]!) > SMALL_SIZE;
    if (a === ACTION.segment_alloc && all.size[i] !== SMALL_BUFFER) chains.segmentAlloc(all.address[i]!, all.size[i]!);
    else if (a === ACTION.segment_free && all.size[i] !== SMALL_BUFFER) chains.segmentFree(all.address[i]!, all.size[i]!);
    else if (a === ACTION.free_completed && large) chains.freeCompleted(all.address[i]!);
    if (a === ACTION.alloc) {
      const rounded = round(all.size[i]!);
      const life: Life = { address: all.address[i]!, size: large ? chains.alloc(all.address[i]!, rounded, NaN, -1) : rounded, alloc: t, free: null };
      live.set(life.address, life);
      allocated += life.size;
      if (inStep) lives.push(life), (peak = Math.max(peak, allocated));
    } else if (a === ACTION.free || a === ACTION.free_requested) {
      const life = live.get(all.address[i]!)!;
      live.delete(life.address);
      allocated -= life.size;
      if (a === ACTION.free && large) chains.freeCompleted(life.address);
      if (inStep) {
        life.free = t;
        if (atStart!.has(life.address) && atStart!.get(life.address) === life) lives.push(life);
      }
    }
  }
  for (let k = Math.max(0, lastCol); k < sb.columns; k++) atColumnEnd[k] = allocated;
  for (let k = lastCol + 1; k < sb.columns; k++) phaseBefore[k] = phaseNow;
  const heldAcross = [...atStart!.values()].filter((l) => l.free === null).reduce((s, l) => s + l.size, 0);
  return { lives, atStart: atStart!, atColumnEnd, peak, firstTime, byPhase, phaseBefore, heldAcross };
}

const PHASES = ["other", "forward", "backward", "optimizer"];

describe.each(FIXTURES)("%s: the last complete step", (name) => {
  test("bands live from their alloc record to their free record; held + bands + rest = allocated at every column's end; the strip is the records' phases", async () => {
    const m = await model(name);
    const all = records(name);
    const d = m.devices[0]!;
    const rec = d.steps.at(-1)!;
    const sb = stepBands(m, { columns: 48, bands: 10 })!;
    expect(sb.step).toBe(rec.step);
    expect(sb.running).toBe(false);
    expect(sb.partial).toBe(false);
    expect(sb.notes).toEqual([]);
    const tr = truth(all, rec.step, sb);
    // The model's step starts where its first record does.
    expect(sb.start_us).toBe(tr.firstTime);

    // Each band is one block's life as the records tell it.
    expect(sb.bands.length).toBe(10);
    for (const b of sb.bands) {
      const life = tr.lives.find((l) => l.address === b.address && (l.alloc === null || l.alloc < sb.start_us ? sb.start_us : l.alloc) === b.from_us);
      expect({ address: b.address, found: life !== undefined }).toEqual({ address: b.address, found: true });
      expect(b.size_bytes).toBe(life!.size);
      expect(b.alloc_us).toBe(life!.alloc !== null && life!.alloc >= sb.start_us ? life!.alloc : null);
      expect(b.free_us).toBe(life!.free);
      expect(b.to_us).toBe(life!.free ?? sb.end_us);
    }
    // The blocks held across the whole step, from before it: one band.
    expect(sb.held.bytes).toBe(tr.heldAcross);
    expect(sb.held.alive_now_bytes).toBeLessThanOrEqual(sb.held.bytes);
    expect(sb.rest_blocks + sb.bands.length).toBe(tr.lives.length);

    // Every column: what the records say was allocated at its end, made of held + bands + rest.
    const colEnd = (c: number) => sb.start_us + (c + 1) * sb.column_us;
    for (let c = 0; c < sb.columns; c++) {
      const end = colEnd(c);
      const last = c === sb.columns - 1;
      const bands = sb.bands.filter((b) => b.from_us < end && (b.free_us === null || (!last && b.free_us >= end))).reduce((s, b) => s + b.size_bytes, 0);
      expect({ c, sum: sb.held.bytes + bands + sb.rest_bytes[c]! }).toEqual({ c, sum: tr.atColumnEnd[c]! });
      expect({ c, allocated: sb.allocated_bytes[c] }).toEqual({ c, allocated: tr.atColumnEnd[c]! });
    }
    // The step record's own figures: allocated at its end, and its peak.
    expect(sb.allocated_bytes.at(-1)).toBe(rec.allocated_at_end);
    expect(sb.peak_bytes).toBe(rec.peak_allocated);
    expect(tr.peak).toBe(rec.peak_allocated);
    expect(Math.max(...sb.allocated_max_bytes.map((v) => v!))).toBe(rec.peak_allocated);

    // The phase strip: the phase with the most records of the column, else the last one stamped.
    for (let c = 0; c < sb.columns; c++) {
      const counts = tr.byPhase[c]!;
      const most = Math.max(...counts);
      const expected = most > 0 ? PHASES[counts.indexOf(most)] : tr.phaseBefore[c]! >= 0 ? PHASES[tr.phaseBefore[c]!] : null;
      expect({ c, phase: sb.phase[c] }).toEqual({ c, phase: expected ?? null });
    }
    // A training step: forward, then backward, then the optimizer, each in its columns.
    const f = sb.phase.indexOf("forward");
    const b = sb.phase.indexOf("backward");
    expect(f).toBeGreaterThanOrEqual(0);
    expect(b).toBeGreaterThan(f);
    expect(sb.phase.lastIndexOf("optimizer")).toBeGreaterThan(b);
    // The range strip names the user's record_function ranges, never by number.
    expect(sb.range).toContain("train_step");
    for (const r of sb.range) if (r !== null) expect(r).not.toMatch(/^range#/);
  });

  test("every kept step the records reach adds up to its step record", async () => {
    const m = await model(name);
    const d = m.devices[0]!;
    const choices = timelineSteps(m)!;
    expect(choices.steps).toEqual(d.steps.map((s) => s.step));
    for (const rec of d.steps) {
      const sb = stepBands(m, { step: rec.step, columns: 20, bands: 4 })!;
      expect({ step: rec.step, end: sb.allocated_bytes.at(-1), peak: sb.peak_bytes }).toEqual({ step: rec.step, end: rec.allocated_at_end, peak: rec.peak_allocated });
      expect(sb.allocated_bytes[0]! - sb.rest_bytes[0]!).toBeGreaterThanOrEqual(sb.held.bytes);
    }
  });
});

describe("what the model knows of a band", () => {
  test("GPT-2: blocks still alive carry the model's name and category; the parameters and AdamW state are held from earlier steps", async () => {
    const m = await model("hf-gpt2");
    const sb = stepBands(m, { columns: 40, bands: 40 })!;
    const now = new Map(blocks(m, { limit: Infinity }).blocks.map((b) => [b.address, b]));
    const alive = sb.bands.filter((b) => b.alive_now);
    expect(alive.length).toBeGreaterThan(0);
    for (const b of alive) expect({ a: b.address, category: b.category, name: b.name }).toEqual({ a: b.address, category: now.get(b.address)!.category, name: now.get(b.address)!.name });
    const held = sb.held.largest.map((h) => h.label);
    expect(held).toEqual(expect.arrayContaining(["transformer.wte.weight", "exp_avg of transformer.wte.weight", "exp_avg_sq of transformer.wte.weight"]));
    for (const b of sb.bands) expect(b.label).not.toMatch(/^0x/);
  });
});

describe("kept records that do not reach back to the step's start", () => {
  test("partial, from the oldest record kept: nothing shown before it, the end still the step record's", async () => {
    const m = await model("hf-gpt2", 700);
    const d = m.devices[0]!;
    const rec = d.steps.at(-1)!;
    const t = m.tail!;
    const oldest = t.time_us[t.slot(t.first)]!;
    expect(oldest).toBeGreaterThan(rec.start_us); // the step's own records are more than 700
    const sb = stepBands(m, { columns: 30 })!;
    expect(sb.partial).toBe(true);
    expect(sb.from_us).toBe(oldest);
    expect(sb.notes[0]).toContain("the kept records (the newest 700) begin");
    expect(sb.held.label).toBe("held from before the kept records");
    const firstKnown = Math.floor((oldest - sb.start_us) / sb.column_us);
    expect(firstKnown).toBeGreaterThan(0);
    for (let c = 0; c < sb.columns; c++) expect({ c, known: sb.allocated_bytes[c] !== null }).toEqual({ c, known: c >= firstKnown });
    expect(sb.allocated_bytes.at(-1)).toBe(rec.allocated_at_end);
    // No band claims an allocation it did not see: a seen one has its record in what is kept.
    const allocs = new Set<number>();
    for (let k = t.first; k < t.total; k++) if (t.action[t.slot(k)] === ACTION.alloc) allocs.add(t.time_us[t.slot(k)]!);
    for (const b of sb.bands) {
      expect(b.from_us).toBeGreaterThanOrEqual(oldest);
      if (b.alloc_us !== null) expect(allocs.has(b.alloc_us)).toBe(true);
    }
    // A step wholly before the kept records is not offered.
    expect(timelineSteps(m)!.steps).not.toContain(rec.step - 3);
  });
});

describe("the running step", () => {
  test("mid-step, its window ends at its last record; it adds up to the device's allocated and the step's peak so far", () => {
    const all = records("normal");
    // Stop in the middle of the last step: half-way through its records.
    let at = 0;
    for (let i = 0; i < all.count; i++) if (all.action[i] === ACTION.step) at = i;
    const stop = at + Math.floor((all.count - at) / 3);
    const m = createModel().keepTrace();
    m.ingest(all, 0, 0, stop);
    const d = m.devices[0]!;
    const sb = stepBands(m, { step: d.cur.step, columns: 30 })!;
    expect(sb.running).toBe(true);
    expect(sb.end_us).toBe(all.time_us[stop - 1]!);
    expect(sb.allocated_bytes.at(-1)).toBe(d.allocated);
    expect(sb.peak_bytes).toBe(d.cur.peak_allocated);
    expect(stepBands(m, { columns: 30 })!.step).toBe(d.steps.at(-1)!.step); // the default: the last complete one
    expect(() => stepBands(m, { step: 999, columns: 30 })).toThrow(/step 999 is not kept/);
    expect(() => stepBands(m, { columns: 0 })).toThrow(/columns must be at least 1/);
  });

  test("a model that keeps no records has no timeline: null, not made up", async () => {
    const m = createModel();
    m.ingest(records("normal"));
    expect(stepBands(m, { columns: 10 })).toBeNull();
    expect(timelineSteps(m)).toBeNull();
  });
});
