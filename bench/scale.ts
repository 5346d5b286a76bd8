// Eight ranks on one node, by simulation: eight models fed, on one thread, at the event rate of a
// real training run recorded on an H100 (test/fixtures/normal.ring, its steady-state steps) and at
// PyTorch's tightest allocation loop. Reports the share of one core, split by thread.
//   bun bench/scale.ts [OUT_DIR] [SECONDS]
// Each rank reads its records the way the monitor does: libgpumem's reader on a ring file (written
// here before the clock starts, the recording looped at the rate), one call a tick into the batch,
// the frees folded (src/ffi/ring.ts), then the model's ingest. Beside it, in the same run, the way
// this benchmark fed the models before: the records copied into the batch by a JavaScript loop,
// every record as written. That copy is this script's own work, which the monitor never does.
// A monitor runs for hours: what it costs is the steady state, once the JIT has compiled the
// model's code. The JIT compiles on threads of its own for tens of seconds at this load, so the
// runs that count come after warm-up runs that end when the JIT threads go quiet; the warm-up's
// cost is reported beside them.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ACTION, newEventBatch, type EventBatch } from "../src/ffi/events";
import { openRing, type RingReader } from "../src/ffi/ring";
import { HEADER_OFFSET as H, HEADER_SIZE, MODE, RECORD_OFFSET as R, RECORD_SIZE, RING_ABI_VERSION, RING_MAGIC } from "../src/ffi/wire";
import { createModel } from "../src/profiler";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const SECONDS = Number(process.argv[3] ?? 10);
const RANKS = 8;
const TICKS_PER_SECOND = 10;

// The recording, every record as written (no fold): what the ring files repeat.
const rec = openRing(join(import.meta.dir, "..", "test", "fixtures", "normal.ring"));
const all = newEventBatch(1 << 15);
rec.read(all);
rec.close();
// Steady state: from the first step mark on (the first step holds CUDA's own warm-up).
let first = 0;
while (first < all.count && all.action[first] !== ACTION.step) first++;
const n = all.count - first;
const spanUs = all.time_us[all.count - 1]! - all.time_us[first]!;
const measuredRate = n / (spanUs / 1e6);

/** Record k of the looped steady state into `out` at `at`, its time moved on by the loops before it. */
function put(k: number, out: EventBatch, at: number): void {
  const j = first + (k % n);
  out.time_us[at] = all.time_us[j]! + Math.floor(k / n) * spanUs;
  out.action[at] = all.action[j]!;
  out.device[at] = all.device[j]!;
  out.phase[at] = all.phase[j]!;
  out.address[at] = all.address[j]!;
  out.size[at] = all.size[j]!;
  out.stream[at] = all.stream[j]!;
  out.extra[at] = all.extra[j]!;
  out.step[at] = all.step[j]!;
  out.range[at] = all.range[j]!;
}

/** A closed ring file holding `count` records of the looped steady state (time in unix ns). */
function writeRing(path: string, count: number): void {
  let capacity = 1;
  while (capacity < count) capacity *= 2;
  const buf = Buffer.alloc(HEADER_SIZE + capacity * RECORD_SIZE);
  buf.writeBigUInt64LE(RING_MAGIC, H.magic);
  buf.writeUInt32LE(RING_ABI_VERSION, H.abi_version);
  buf.writeUInt32LE(HEADER_SIZE, H.header_size);
  buf.writeUInt32LE(RECORD_SIZE, H.record_size);
  buf.writeUInt32LE(1, H.n_devices);
  buf.writeBigUInt64LE(BigInt(capacity), H.capacity);
  buf.writeUInt32LE(MODE.hook, H.mode);
  buf.writeUInt8(1, H.closed);
  buf.writeBigUInt64LE(BigInt(count), H.write_index);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  // u64 fields as two u32 halves: every value here is below 2^53, and no BigInt per field.
  const u64 = (o: number, x: number) => {
    v.setUint32(o, x % 4294967296, true);
    v.setUint32(o + 4, Math.floor(x / 4294967296), true);
  };
  const one = newEventBatch(1);
  for (let k = 0; k < count; k++) {
    put(k, one, 0);
    const o = HEADER_SIZE + k * RECORD_SIZE;
    u64(o + R.seq, k + 1);
    u64(o + R.time, Math.round(one.time_us[0]! * 1000));
    u64(o + R.address, one.address[0]!);
    u64(o + R.size, one.size[0]!);
    u64(o + R.stream, one.stream[0]!);
    u64(o + R.extra, one.extra[0]!);
    v.setUint32(o + R.step, one.step[0]!, true);
    v.setUint32(o + R.range, one.range[0]!, true);
    v.setUint8(o + R.action, one.action[0]!);
    v.setInt8(o + R.device, one.device[0]!);
    v.setUint8(o + R.phase, one.phase[0]!);
  }
  writeFileSync(path, buf);
}

type Feed = "reader" | "js-copy";

/** CPU time (ms) of each of this process's threads, by thread id, with the thread's name
 *  (/proc/self/task/N/stat, 10 ms resolution). */
function threadCpuMs(): Map<string, { name: string; ms: number }> {
  const out = new Map<string, { name: string; ms: number }>();
  for (const t of readdirSync("/proc/self/task")) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/self/task/${t}/stat`, "utf8");
    } catch {
      continue; // the thread ended
    }
    const name = t === String(process.pid) ? "main" : stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    out.set(t, { name, ms: (Number(f[11]) + Number(f[12])) * 10 }); // utime + stime, in USER_HZ (100) ticks
  }
  return out;
}

/** Thread CPU between two readings, as shares of the wall time, grouped: the main thread (reads and
 *  ingest), the JIT's compiler threads, the rest (the collector's helpers, the allocator's
 *  scavenger). A thread that ended in between is missing here (the process total has it). */
function threadShares(a: Map<string, { name: string; ms: number }>, b: Map<string, { name: string; ms: number }>, wallS: number) {
  let main = 0;
  let jit = 0;
  let other = 0;
  for (const [tid, { name, ms }] of b) {
    const d = (ms - (a.get(tid)?.ms ?? 0)) / 1000 / wallS;
    if (name === "main") main += d;
    else if (name.startsWith("JIT")) jit += d;
    else other += d;
  }
  return { main: +main.toFixed(4), jit: +jit.toFixed(4), other: +other.toFixed(4) };
}

async function simulate(feed: Feed, rate: number, ring: string, seconds = SECONDS) {
  const per = Math.round(rate / TICKS_PER_SECOND);
  const models = Array.from({ length: RANKS }, () => createModel());
  const batches = Array.from({ length: RANKS }, () => newEventBatch(per));
  const readers: RingReader[] = feed === "reader" ? Array.from({ length: RANKS }, () => openRing(ring, { fold: true })) : [];
  let pos = 0;
  let records = 0;
  const cpu0 = process.cpuUsage();
  const threads0 = threadCpuMs();
  const t0 = performance.now();
  const ticks = seconds * TICKS_PER_SECOND;
  for (let tick = 0; tick < ticks; tick++) {
    for (let r = 0; r < RANKS; r++) {
      const b = batches[r]!;
      if (feed === "reader") readers[r]!.read(b);
      else {
        for (let i = 0; i < per; i++) put(pos + i, b, i);
        b.count = per;
      }
      models[r]!.ingest(b);
      records += b.count;
    }
    pos += per;
    const wait = t0 + ((tick + 1) * 1000) / TICKS_PER_SECOND - performance.now();
    if (wait > 0) await Bun.sleep(wait);
  }
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(cpu0);
  const threads = threadShares(threads0, threadCpuMs(), wall);
  for (const r of readers) r.close();
  const events = models.reduce((s, m) => s + m.eventsIngested, 0);
  return {
    feed,
    ranks: RANKS,
    events_per_second_per_rank: Math.round(rate),
    seconds: +wall.toFixed(2),
    events_ingested: events,
    records_ingested: records,
    cpu_share_of_one_core: +((c.user + c.system) / 1e6 / wall).toFixed(4),
    /** The same CPU by thread (10 ms resolution): main, the JIT's compilers, the rest. */
    threads,
    ticks,
  };
}

const tmp = mkdtempSync(join(tmpdir(), "gpumem-scale-"));
const result: Record<string, unknown> = { date: new Date().toISOString(), recorded_rate_events_per_second: Math.round(measuredRate), seconds: SECONDS };
const rows: string[] = [];
const warmRows: string[] = [];
const WARM_S = 5;
const WARM_MAX = 8;
const pct = (runs: { cpu_share_of_one_core: number }[]) => runs.map((r) => `${(r.cpu_share_of_one_core * 100).toFixed(1)}%`).join(", ");
try {
  // The tight loop's ring would hold 13 million records for 10 s: it runs 2 s.
  for (const [label, rate, seconds] of [["realistic", measuredRate, SECONDS], ["tight_loop", 1_300_000, Math.min(SECONDS, 2)]] as const) {
    const ring = join(tmp, `${label}.ring`);
    writeRing(ring, Math.round(rate / TICKS_PER_SECOND) * seconds * TICKS_PER_SECOND);
    // Warm-up: runs of each feed, WARM_S long, until the JIT's threads take under 1% of a core in
    // both (at most WARM_MAX of them); then the two interleaved, twice: a slow moment of the
    // machine hits both.
    const warm = [];
    for (let k = 0; k < WARM_MAX; k++) {
      const a = await simulate("reader", rate, ring, Math.min(WARM_S, seconds));
      const b = await simulate("js-copy", rate, ring, Math.min(WARM_S, seconds));
      warm.push({ reader: a, js_copy: b });
      if (a.threads.jit < 0.01 && b.threads.jit < 0.01) break;
    }
    const reader: Awaited<ReturnType<typeof simulate>>[] = [];
    const copy = [];
    for (let k = 0; k < 2; k++) {
      reader.push(await simulate("reader", rate, ring, seconds));
      copy.push(await simulate("js-copy", rate, ring, seconds));
    }
    result[`${label}_warm_up`] = warm;
    warmRows.push(`| ${Math.round(rate).toLocaleString("en")} events/s | ${warm.length} × ${Math.min(WARM_S, seconds)} s | ${warm.map((w) => pct([w.reader])).join(", ")} | ${warm.map((w) => `${(w.reader.threads.jit * 100).toFixed(1)}%`).join(", ")} |`);
    result[label] = { reader, js_copy: copy };
    const split = (runs: Awaited<ReturnType<typeof simulate>>[]) => runs.map((r) => `${(r.threads.main * 100).toFixed(1)} / ${(r.threads.jit * 100).toFixed(1)} / ${(r.threads.other * 100).toFixed(1)}`).join(", ");
    rows.push(
      `| ${Math.round(rate).toLocaleString("en")} events/s | ${label === "realistic" ? "the recorded run's steady state (a small transformer, batch 16×64)" : "PyTorch's tightest loop (`torch.empty`/`del`, 3 events each ~2.3 µs)"} | ${pct(reader)} | ${split(reader)} | ${pct(copy)} |`,
    );
    rmSync(ring);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "scale.json"), `${JSON.stringify(result, null, 2)}\n`);
const md = `# Eight ranks on one node, simulated

Command: \`bun bench/scale.ts\` (${result.date}, ${navigator.hardwareConcurrency} cores, one thread).
Eight models fed every 100 ms for ${SECONDS} s (the tight loop ${Math.min(SECONDS, 2)} s) with events of a real training run recorded on an H100
(\`test/fixtures/normal.ring\`, steady-state steps, looped), at two rates per rank. CPU as a share of one core
in the steady state: two runs of each feed, interleaved, after warm-up runs that end once the JIT's compiler
threads take under 1% of a core (below).

| rate per rank | source | the monitor's path: libgpumem's reader (frees folded), the model | the same by thread: main / JIT / other | the records copied by this script in JavaScript, unfolded (the earlier method) |
| --- | --- | --- | --- | --- |
${rows.join("\n")}

The monitor reads a ring with one FFI call a batch (src/ffi/ring.ts); the copy in the last column is
work of this benchmark alone, kept beside it so that the earlier figures can be compared.

## Warm-up (the monitor's path): what a session's first seconds cost

| rate per rank | runs | CPU share of each | of it, the JIT's threads |
| --- | --- | --- | --- |
${warmRows.join("\n")}
`;
writeFileSync(join(outDir, "scale.md"), md);
console.log(md);
