// Ingest speed and memory of the profiler model.
//   bun bench/ingest.ts [OUT_DIR] [--events N]     (default bench/results, 50 million events)
// 1. Throughput: the model's ingest over a 1M-event batch, side by side with a bare loop that reads
//    the same columns (the ratio is the model's own cost per event). Interleaved runs, medians.
// 2. Memory: replay N events (default 50M) through one model in 1M-event batches; RSS and heap
//    after a full GC, after warm-up and at the end.
// The batch imitates a training process: ~10k live blocks replaced in turn (free the old block,
// allocate its successor), a temporary every fourth replacement, a phase mark every 2,500 events,
// a step every four phases, record_function ranges changing every 64 events, a few segments.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { ACTION, newEventBatch, type EventBatch } from "../src/ffi/events";
import { openRing } from "../src/ffi/ring";
import type { RingHeader } from "../src/ffi/events";
import { blocks, breakdown, categories, createModel, findings, replay, segments, steps, summary, timeline, type EventSource } from "../src/profiler";

const args = process.argv.slice(2);
const eventsArg = args.indexOf("--events");
const TOTAL = eventsArg >= 0 ? Number(args[eventsArg + 1]) : 50_000_000;
const outDir = args.find((a, i) => !a.startsWith("--") && args[i - 1] !== "--events") ?? join(import.meta.dir, "results");
mkdirSync(outDir, { recursive: true });

const LIVE = 10_000;
const CYCLES = 40; // even: every slot ends on the address it started with, so batches repeat
const BATCH = 1_048_576;
const EVENTS_PER_PHASE = 2_500;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Template {
  batch: EventBatch;
  span_us: number;
  steps: number;
}

/** Build the repeating batch; `prologue` also allocates the live set first (the first batch only). */
function makeTemplate(prologue: boolean): Template {
  const b = newEventBatch(BATCH);
  let n = 0;
  let t = 0;
  let step = 0;
  let phase = 1;
  let range = 0;
  let sincePhase = 0;
  let phases = 0;
  const addrA = (j: number) => 0x7f00_0000_0000 + j * 0x40_0000;
  const addrB = (j: number) => 0x7f80_0000_0000 + j * 0x40_0000;
  const sizeOf = (j: number) => 512 * (1 + ((j * 2654435761) % 8192));
  const push = (action: number, address: number, size: number) => {
    if (n === BATCH) return;
    t += 20; // 50,000 events a second: 50M events span ~17 minutes, so every timeline level wraps or fills
    b.time_us[n] = t;
    b.action[n] = action;
    b.device[n] = 0;
    b.phase[n] = phase;
    b.address[n] = address;
    b.size[n] = size;
    b.stream[n] = 7;
    b.extra[n] = 0;
    b.step[n] = step;
    b.range[n] = range;
    n++;
    if (n % 64 === 0) range = (n >> 6) % 21; // 0 = outside any range
    if (action < 16 && ++sincePhase === EVENTS_PER_PHASE) {
      sincePhase = 0;
      phases++;
      phase = (phase % 3) + 1;
      push(ACTION.phase, 0, 0);
      if (phases % 4 === 0) {
        step++;
        push(ACTION.step, 0, 0);
      }
    }
  };
  if (prologue) {
    push(ACTION.segment_alloc, 0x7e00_0000_0000, 2 * 1024 ** 3);
    for (let j = 0; j < LIVE; j++) push(ACTION.alloc, addrA(j), sizeOf(j));
  }
  for (let c = 0; c < CYCLES && n < BATCH; c++) {
    for (let j = 0; j < LIVE && n < BATCH; j++) {
      const [from, to] = c % 2 === 0 ? [addrA(j), addrB(j)] : [addrB(j), addrA(j)];
      push(ACTION.free_requested, from, sizeOf(j));
      push(ACTION.alloc, to, sizeOf(j));
      if (j % 4 === 0) {
        push(ACTION.alloc, 0x7d00_0000_0000 + j * 4096, 4096);
        push(ACTION.free_requested, 0x7d00_0000_0000 + j * 4096, 4096);
      }
    }
  }
  if (n >= BATCH) throw new Error("template does not fit its batch: cycles would not repeat");
  b.count = n;
  return { batch: b, span_us: t, steps: step };
}

/** Shift a template's time and steps so that it continues where the last batch ended. */
function shift(src: Template, dst: EventBatch, dt: number, dstep: number): void {
  const n = src.batch.count;
  dst.count = n;
  dst.action.set(src.batch.action.subarray(0, n));
  dst.device.set(src.batch.device.subarray(0, n));
  dst.phase.set(src.batch.phase.subarray(0, n));
  dst.address.set(src.batch.address.subarray(0, n));
  dst.size.set(src.batch.size.subarray(0, n));
  dst.stream.set(src.batch.stream.subarray(0, n));
  dst.extra.set(src.batch.extra.subarray(0, n));
  dst.range.set(src.batch.range.subarray(0, n));
  for (let i = 0; i < n; i++) {
    dst.time_us[i] = src.batch.time_us[i]! + dt;
    dst.step[i] = src.batch.step[i]! + dstep;
  }
}

const HEADER: RingHeader = {
  abi_version: 1, capacity: BATCH, pid: 1, mode: "hook", n_devices: 0, attach_unix_us: 0, updated_unix_us: 0,
  current_step: 0, current_range: 0,
  current_line: 0, current_phase: 0, closed: true, write_index: 0, totals: [],
};

function copyBatch(src: EventBatch, dst: EventBatch): void {
  for (const c of ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range"] as const)
    (dst[c] as Float64Array).set((src[c] as Float64Array).subarray(0, src.count));
  dst.count = src.count;
}

/** The bare loop: reads the columns the model reads, and does the least work that uses them. */
function bare(b: EventBatch): number {
  let allocated = 0;
  let x = 0;
  const { action, size, address, time_us, step, phase, range, stream, device } = b;
  for (let i = 0; i < b.count; i++) {
    const a = action[i]!;
    x += time_us[i]! + step[i]! + phase[i]! + range[i]! + device[i]!;
    if (a === 0) allocated += size[i]! + address[i]! * 0 + stream[i]! * 0;
    else if (a === 1) allocated -= size[i]!;
  }
  return allocated + x * 0;
}

// ---- 1. throughput ----
const first = makeTemplate(true);
const body = makeTemplate(false);
const work = newEventBatch(BATCH);
let model = createModel();
model.ingest(first.batch);
// The monitor's models also keep the last 100,000 records for `d` (a snapshot written from them):
// the same model with that copy, timed on the same batches.
const traced = createModel().keepTrace();
traced.ingest(first.batch);
let clock = first.span_us;
let stepBase = first.steps + 1;
const next = () => {
  shift(body, work, clock, stepBase);
  clock += body.span_us;
  stepBase += body.steps + 1;
};
// warm up both
for (let k = 0; k < 3; k++) {
  next();
  model.ingest(work);
  traced.ingest(work);
  bare(work);
}
// Each run feeds one 1M-event template in batches of 65,536 events (replay's batch size), each
// copied into a batch first (untimed), as the ring reader copies records in before the model reads
// them: the bare loop and the model see the same warm batch, one after the other.
const CHUNK = 65_536;
const chunk = newEventBatch(CHUNK);
const modelRates: number[] = [];
const bareRates: number[] = [];
const tracedRates: number[] = [];
let sink = 0;
const RUNS = 15;
for (let k = 0; k < RUNS; k++) {
  next();
  let bareNs = 0;
  let modelNs = 0;
  let tracedNs = 0;
  for (let start = 0; start < work.count; start += CHUNK) {
    const n = Math.min(CHUNK, work.count - start);
    for (const c of ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range"] as const)
      (chunk[c] as Float64Array).set((work[c] as Float64Array).subarray(start, start + n));
    chunk.count = n;
    let t0 = Bun.nanoseconds();
    sink += bare(chunk);
    bareNs += Bun.nanoseconds() - t0;
    t0 = Bun.nanoseconds();
    model.ingest(chunk);
    modelNs += Bun.nanoseconds() - t0;
    t0 = Bun.nanoseconds();
    traced.ingest(chunk);
    tracedNs += Bun.nanoseconds() - t0;
  }
  bareRates.push(work.count / (bareNs / 1e9));
  modelRates.push(work.count / (modelNs / 1e9));
  tracedRates.push(work.count / (tracedNs / 1e9));
}
const modelRate = median(modelRates);
const bareRate = median(bareRates);
const check = summary(model).devices[0]!;
if (check.live_blocks !== LIVE) throw new Error(`benchmark batch is broken: ${check.live_blocks} live blocks, expected ${LIVE}`);

// ---- 2. memory over TOTAL events ----
const mb = (x: number) => Math.round((x / 1024 / 1024) * 10) / 10;
function mem() {
  Bun.gc(true);
  const m = process.memoryUsage();
  return { rss_mb: mb(m.rss), heap_used_mb: mb(m.heapUsed) };
}
// Through replay() itself, as `gpumem-tui replay FILE --json` runs it: a source that hands out the
// batches, states every second of recorded time (serialized, as NDJSON would be, then dropped).
model = createModel();
clock = first.span_us;
stepBase = first.steps + 1;
let fed = 0;
const WARMUP = 5_000_000;
let warm: ReturnType<typeof mem> | null = null;
const samples: Array<{ events: number } & ReturnType<typeof mem>> = [];
let served = 0;
const source: EventSource = {
  header: () => HEADER,
  read(out: EventBatch) {
    if (served >= TOTAL) return { count: (out.count = 0), lost: 0 };
    if (served === 0) {
      copyBatch(first.batch, out);
    } else {
      next();
      copyBatch(work, out);
    }
    served += out.count;
    return { count: out.count, lost: 0 };
  },
};
let ndjsonBytes = 0;
let states = 0;
const t0 = Bun.nanoseconds();
for await (const line of replay(source, { model, batch_size: BATCH })) {
  ndjsonBytes += JSON.stringify(line).length + 1;
  states++;
  fed = model.eventsIngested;
  if (!warm && fed >= WARMUP) {
    warm = mem();
    samples.push({ events: fed, ...warm });
  } else if (warm && fed - samples[samples.length - 1]!.events >= TOTAL / 10) samples.push({ events: fed, ...mem() });
}
const replaySeconds = (Bun.nanoseconds() - t0) / 1e9;
const end = mem();
samples.push({ events: fed, ...end });
const s = summary(model).devices[0]!;
// ---- 3. what a view pays per frame: each query on the replayed model, first call and again ----
function timeMs(fn: () => unknown): number {
  const t = Bun.nanoseconds();
  fn();
  return Math.round((Bun.nanoseconds() - t) / 1e4) / 100;
}
const QUERIES: Record<string, () => unknown> = {
  summary: () => summary(model),
  "timeline (10 ms)": () => timeline(model, { resolution_us: 10_000 }),
  "timeline (1 min)": () => timeline(model, { resolution_us: 60_000_000 }),
  breakdown: () => breakdown(model),
  steps: () => steps(model),
  categories: () => categories(model),
  "blocks (500 largest)": () => blocks(model, { limit: 500 }),
  "segments (with blocks)": () => segments(model, { withBlocks: true }),
  findings: () => findings(model),
};
const queries: Record<string, { first_ms: number; again_ms: number }> = {};
for (const [name, fn] of Object.entries(QUERIES)) queries[name] = { first_ms: timeMs(fn), again_ms: timeMs(fn) };

// ---- 4. the events of a real training run: test/fixtures/normal.ring (recorded on an H100) ----
// Its records, repeated with addresses, steps and time shifted so that each copy is a new stretch
// of the same training, in batches of 65,536: the model against the bare loop, as in 1.
const recorded = (() => {
  const r = openRing(join(import.meta.dir, "..", "test", "fixtures", "normal.ring"));
  const all = newEventBatch(1 << 16);
  const got = r.read(all);
  r.close();
  return { batch: all, count: got.count };
})();
const COPIES = Math.ceil(1_000_000 / recorded.count);
const rec = newEventBatch(recorded.count * COPIES);
{
  const src = recorded.batch;
  const n = recorded.count;
  const span = src.time_us[n - 1]! - src.time_us[0]! + 1;
  const steps = src.step[n - 1]! + 1;
  for (let c = 0; c < COPIES; c++)
    for (let i = 0; i < n; i++) {
      const j = c * n + i;
      rec.time_us[j] = src.time_us[i]! + c * span;
      rec.action[j] = src.action[i]!;
      rec.device[j] = src.device[i]!;
      rec.phase[j] = src.phase[i]!;
      rec.address[j] = src.address[i]! === 0 ? 0 : src.address[i]! + c * 2 ** 40;
      rec.size[j] = src.size[i]!;
      rec.stream[j] = src.stream[i]!;
      rec.extra[j] = src.extra[i]!;
      rec.step[j] = src.step[i]! + c * steps;
      rec.range[j] = src.range[i]!;
    }
  rec.count = n * COPIES;
}
const recModelRates: number[] = [];
const recBareRates: number[] = [];
for (let k = 0; k < 7; k++) {
  const m = createModel();
  let bareNs = 0;
  let modelNs = 0;
  for (let start = 0; start < rec.count; start += CHUNK) {
    const n = Math.min(CHUNK, rec.count - start);
    for (const c of ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range"] as const)
      (chunk[c] as Float64Array).set((rec[c] as Float64Array).subarray(start, start + n));
    chunk.count = n;
    let t0 = Bun.nanoseconds();
    sink += bare(chunk);
    bareNs += Bun.nanoseconds() - t0;
    t0 = Bun.nanoseconds();
    m.ingest(chunk);
    modelNs += Bun.nanoseconds() - t0;
  }
  if (k > 0) {
    // the first model warms the JIT up
    recModelRates.push(rec.count / (modelNs / 1e9));
    recBareRates.push(rec.count / (bareNs / 1e9));
  }
}
const recordedResult = {
  source: "test/fixtures/normal.ring",
  records: recorded.count,
  copies: COPIES,
  events: rec.count,
  model_events_per_s: Math.round(median(recModelRates)),
  bare_loop_events_per_s: Math.round(median(recBareRates)),
  ratio_bare_over_model: Math.round((median(recBareRates) / median(recModelRates)) * 10) / 10,
};

const result = {
  command: `bun bench/ingest.ts${eventsArg >= 0 ? ` --events ${TOTAL}` : ""}`,
  date: new Date().toISOString(),
  machine: { cpu: cpus()[0]?.model ?? "unknown", cores: cpus().length, bun: Bun.version },
  batch: { events: work.count, live_blocks: LIVE, events_per_phase: EVENTS_PER_PHASE, ranges: 20 },
  throughput: {
    model_events_per_s: Math.round(modelRate),
    model_best_events_per_s: Math.round(Math.max(...modelRates)),
    model_worst_events_per_s: Math.round(Math.min(...modelRates)),
    bare_loop_events_per_s: Math.round(bareRate),
    model_ns_per_event: Math.round((1e9 / modelRate) * 10) / 10,
    bare_ns_per_event: Math.round((1e9 / bareRate) * 10) / 10,
    ratio_bare_over_model: Math.round((bareRate / modelRate) * 10) / 10,
    model_keeping_trace_events_per_s: Math.round(median(tracedRates)),
    ratio_model_over_model_keeping_trace: Math.round((modelRate / median(tracedRates)) * 100) / 100,
    runs: modelRates.length,
    target_events_per_s: 5_000_000,
    meets_target: modelRate >= 5_000_000,
  },
  memory: {
    events: fed,
    replay_seconds: Math.round(replaySeconds * 10) / 10,
    replay_events_per_s: Math.round(fed / replaySeconds),
    states,
    ndjson_bytes: ndjsonBytes,
    after_warmup: warm,
    at_end: end,
    growth_rss_mb: warm ? mb((end.rss_mb - warm.rss_mb) * 1024 * 1024) : null,
    growth_heap_mb: warm ? mb((end.heap_used_mb - warm.heap_used_mb) * 1024 * 1024) : null,
    limit_mb: 50,
    samples,
    final_steps: s.step,
    final_live_blocks: s.live_blocks,
  },
  queries,
  recorded: recordedResult,
  sink: sink === 0.5 ? 1 : 0,
};
const okMem = result.memory.growth_rss_mb !== null && result.memory.growth_rss_mb < 50;
writeFileSync(join(outDir, "ingest.json"), `${JSON.stringify(result, null, 2)}\n`);
const md = `# Profiler ingest benchmark

Command: \`${result.command}\` (${result.date}; ${result.machine.cpu}, ${result.machine.cores} cores, bun ${result.machine.bun}).
One core (Bun runs the model on one thread). Batch: ${result.batch.events.toLocaleString("en")} events imitating a training
process (${LIVE.toLocaleString("en")} live blocks replaced in turn, temporaries, a phase mark every ${EVENTS_PER_PHASE} events,
a step every four phases, 20 record_function ranges).

## Throughput (median of ${modelRates.length} interleaved runs of ${work.count.toLocaleString("en")} events, in batches of ${CHUNK.toLocaleString("en")})

| loop | events/s | ns/event |
| --- | ---: | ---: |
| model \`ingest\` | ${result.throughput.model_events_per_s.toLocaleString("en")} | ${result.throughput.model_ns_per_event} |
| bare loop over the same columns | ${result.throughput.bare_loop_events_per_s.toLocaleString("en")} | ${result.throughput.bare_ns_per_event} |
| model \`ingest\` keeping the last 100,000 records (the monitor's models, for \`d\`) | ${result.throughput.model_keeping_trace_events_per_s.toLocaleString("en")} | ${Math.round((1e9 / result.throughput.model_keeping_trace_events_per_s) * 10) / 10} |

Keeping the records costs ${result.throughput.ratio_model_over_model_keeping_trace}× the model alone (a copy per batch, not per event).
Model runs ranged from ${result.throughput.model_worst_events_per_s.toLocaleString("en")} to ${result.throughput.model_best_events_per_s.toLocaleString("en")} events/s (a shared 2-core machine: the bare loop varies as much).
The model costs ${result.throughput.ratio_bare_over_model}× the bare loop. Target ≥ 5,000,000 events/s: ${result.throughput.meets_target ? "met" : "NOT met"}.

## Memory over ${fed.toLocaleString("en")} events, through \`replay()\`

Replayed in ${result.memory.replay_seconds} s (${result.memory.replay_events_per_s.toLocaleString("en")} events/s, including batch preparation
and ${states} NDJSON states serialized, ${mb(ndjsonBytes)} MB).
RSS after warm-up (${WARMUP.toLocaleString("en")} events): ${warm?.rss_mb} MB; at the end: ${end.rss_mb} MB; growth ${result.memory.growth_rss_mb} MB
(heap used ${warm?.heap_used_mb} → ${end.heap_used_mb} MB). Limit 50 MB: ${okMem ? "met" : "NOT met"}. Most of the heap is the benchmark's
own event batches (four of ${BATCH.toLocaleString("en")} events, ~51 MB each); the model's share is what grows, and it does not.

| events | RSS MB | heap used MB |
| ---: | ---: | ---: |
${samples.map((x) => `| ${x.events.toLocaleString("en")} | ${x.rss_mb} | ${x.heap_used_mb} |`).join("\n")}

## The events of a real training run

\`${recordedResult.source}\` (${recordedResult.records.toLocaleString("en")} records recorded on an H100: allocator events, phase, step and
range marks) repeated ${recordedResult.copies}× with addresses, steps and time shifted: ${recordedResult.events.toLocaleString("en")} events, medians of 6 runs.

| loop | events/s |
| --- | ---: |
| model \`ingest\` | ${recordedResult.model_events_per_s.toLocaleString("en")} |
| bare loop over the same columns | ${recordedResult.bare_loop_events_per_s.toLocaleString("en")} |

The model costs ${recordedResult.ratio_bare_over_model}× the bare loop on this mix.

## Queries on the replayed model (${s.live_blocks.toLocaleString("en")} live blocks, ${Math.min(s.step, 513)} kept steps)

What a view pays per frame; "again" is the next call with nothing changed (sorts are reused).

| query | first call ms | again ms |
| --- | ---: | ---: |
${Object.entries(queries).map(([k, v]) => `| ${k} | ${v.first_ms} | ${v.again_ms} |`).join("\n")}
`;
writeFileSync(join(outDir, "ingest.md"), md);
console.log(md);
