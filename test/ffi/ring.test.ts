// The ring reader on rings written by a real C producer through the same header as the hook.
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { ACTION, newEventBatch, RING_MAGIC, type EventBatch } from "../../src/ffi/events";
import { openRing, RingError } from "../../src/ffi/ring";
import { HEADER_SIZE, RECORD_SIZE } from "../../src/ffi/wire";
import { publish, writeLaneRing, type LaneRecord } from "../support/lanes";
import { buildTool, produce, tmpPath } from "../support/native";

/** Every record the producer writes carries extra = address ^ size ^ step: a torn record fails it. */
function whole(b: EventBatch, i: number): boolean {
  const x = BigInt(b.address[i]!) ^ BigInt(b.size[i]!) ^ BigInt(b.step[i]!);
  return Number(x) === b.extra[i];
}

function expectRingError(fn: () => unknown, kind: string, message: RegExp) {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(RingError);
    expect((e as RingError).kind).toBe(kind as RingError["kind"]);
    expect((e as Error).message).toMatch(message);
    return;
  }
  throw new Error("expected a RingError");
}

test("the magic that recordings are told apart by is how a ring written by the C writer starts", () => {
  const path = tmpPath("magic.ring");
  produce(path, 64, 1);
  expect(readFileSync(path).subarray(0, 8).toString("latin1")).toBe(RING_MAGIC);
});

/** The producer writing `events` records from each of two threads, and a reader of its ring once
 *  the file is there. */
async function producing(path: string, events: number, ...extra: string[]) {
  const child = Bun.spawn([buildTool("producer"), path, "4096", String(events), "2", ...extra], { stdout: "pipe" });
  for (let i = 0; i < 200; i++) {
    try {
      return { child, r: openRing(path) };
    } catch {
      await Bun.sleep(5);
    }
  }
  throw new Error(`the producer made no readable ring at ${path} within a second`);
}

describe("ring reader", () => {
  test("reads a ring in batches, in order, every record whole and tagged", () => {
    const path = tmpPath("batches.ring");
    expect(produce(path, 4096, 3000)).toBe(3000);
    const r = openRing(path);
    const b = newEventBatch(1000);
    const counts: number[] = [];
    let lost = 0;
    let lastTime = 0;
    for (;;) {
      const { count, lost: l } = r.read(b);
      lost += l;
      if (count === 0) break;
      counts.push(count);
      for (let i = 0; i < count; i++) {
        expect(whole(b, i)).toBe(true);
        expect(b.time_us[i]!).toBeGreaterThanOrEqual(lastTime);
        lastTime = b.time_us[i]!;
      }
    }
    expect(counts).toEqual([1000, 1000, 1000]);
    expect(lost).toBe(0);
    // The first event is the producer's first alloc of block 0, 512 bytes, on device 0.
    const again = openRing(path);
    again.read(b);
    expect([b.action[0], b.action[1], b.size[0], b.device[0], b.stream[0]]).toEqual([ACTION.alloc, ACTION.free_requested, 512, 0, 7]);
    // Phase, range and the line profiler's line come through as written (block % 4, % 3, % 5).
    expect([b.phase[8], b.range[8], b.line[8]]).toEqual([0, 1, 4]);
    // Times are unix microseconds of the run, not raw ticks.
    expect(Math.abs(b.time_us[0]! / 1000 - Date.now())).toBeLessThan(60_000);
    r.close();
    again.close();
  });

  test("a lapped reader gets the newest records and the exact count of those it lost", () => {
    const path = tmpPath("lapped.ring");
    produce(path, 1024, 3000);
    const r = openRing(path);
    const b = newEventBatch(4096);
    const first = r.read(b);
    expect(first).toEqual({ count: 1024, lost: 3000 - 1024 });
    // The oldest record still in the ring is number 1976: block 988, an alloc.
    expect(b.action[0]).toBe(ACTION.alloc);
    expect(b.address[0]! - b.address[1]!).toBe(0);
    expect(r.read(b)).toEqual({ count: 0, lost: 0 });
    const h = r.header();
    expect(h.write_index).toBe(3000);
    // Totals stay exact whatever was lost: 1500 allocs, all freed.
    expect(h.totals[0]!.n_alloc).toBe(1500);
    expect(h.totals[0]!.allocated).toBe(0);
    r.close();
  });

  test("reading while two writer threads run: nothing torn, nothing counted twice, totals exact", async () => {
    const path = tmpPath("live.ring");
    const events = 200_000;
    const { child, r } = await producing(path, events, "--delay-us", "20");
    const b = newEventBatch(2048);
    let seen = 0;
    let lost = 0;
    let torn = 0;
    for (;;) {
      const done = r!.header().closed;
      const { count, lost: l } = r!.read(b);
      seen += count;
      lost += l;
      for (let i = 0; i < count; i++) if (!whole(b, i)) torn++;
      if (done && count === 0) break;
      if (count === 0) await Bun.sleep(1);
    }
    await child.exited;
    expect(torn).toBe(0);
    expect(seen + lost).toBe(2 * events);
    expect(seen).toBeGreaterThan(0);
    const h = r!.header();
    for (const t of h.totals) {
      expect(t.n_alloc).toBe(events / 2);
      expect(t.n_free).toBe(events / 2);
      expect(t.allocated).toBe(0);
    }
    r!.close();
  });

  test("a file that is not a ring: clear error, nothing mapped", () => {
    const path = tmpPath("bad-magic.ring");
    produce(path, 64, 10, "--magic", "0x1234");
    expectRingError(() => openRing(path), "format", /is not a gpumem-tui ring \(bad magic\)/);
    const text = tmpPath("text.ring");
    writeFileSync(text, "x".repeat(HEADER_SIZE + 64 * 64));
    expectRingError(() => openRing(text), "format", /bad magic/);
  });

  test("a ring of another ABI version names the versions this monitor reads", () => {
    const path = tmpPath("abi3.ring");
    produce(path, 64, 10, "--abi", "3");
    expectRingError(() => openRing(path), "version", /ABI version 3, this monitor reads versions 1 and 2/);
  });

  test("truncated rings: shorter than the header, or than the header's capacity", () => {
    const path = tmpPath("short.ring");
    produce(path, 1024, 10);
    const full = readFileSync(path);
    writeFileSync(tmpPath("cut-header.ring"), full.subarray(0, 100));
    expectRingError(() => openRing(tmpPath("cut-header.ring")), "truncated", /100 bytes, smaller than its 4096-byte header/);
    truncateSync(path, HEADER_SIZE + 512 * RECORD_SIZE);
    expectRingError(() => openRing(path), "truncated", /header promises 69632/);
  });

  test("missing, unreadable or non-file paths say so", () => {
    expectRingError(() => openRing(tmpPath("nope.ring")), "open", /cannot open ring .*No such file or directory/);
    const dir = tmpPath("a-directory.ring");
    mkdirSync(dir);
    expectRingError(() => openRing(dir), "format", /not a regular file/);
    const locked = tmpPath("locked.ring");
    produce(locked, 64, 1);
    chmodSync(locked, 0o000);
    // root reads anything; everyone else must get "Permission denied"
    if (process.getuid?.() !== 0) expectRingError(() => openRing(locked), "open", /Permission denied/);
    chmodSync(locked, 0o600);
  });

  test("a closed reader refuses further reads instead of touching unmapped memory", () => {
    const path = tmpPath("closed.ring");
    produce(path, 64, 5);
    const r = openRing(path);
    r.close();
    expectRingError(() => r.read(newEventBatch(8)), "open", /is closed/);
  });
});

/** Everything a reader gives until it has nothing, in batches of `size`: [time µs, device, action]. */
function drain(path: string, size: number) {
  const r = openRing(path);
  const b = newEventBatch(size);
  const rows: Array<[number, number, number]> = [];
  let lost = 0;
  for (;;) {
    const got = r.read(b);
    lost += got.lost;
    for (let i = 0; i < got.count; i++) rows.push([b.time_us[i]!, b.device[i]!, b.action[i]!]);
    if (got.count === 0) break;
  }
  const out = { rows, lost, next: r.next(), written: r.header().write_index };
  r.close();
  return out;
}

const alloc = (time: number, device: number): LaneRecord => ({ time: time * 1000, action: ACTION.alloc, device, address: 0x1000 * time, size: 512 });
const mark = (time: number, seq?: number): LaneRecord => ({ time: time * 1000, action: ACTION.phase, seq });

describe("ring reader, lanes (ABI 2): the shared lane and one lane per device read as one stream", () => {
  test("two device lanes and the shared lane come out merged by time, in any batch size; next() sums the lanes", () => {
    const path = tmpPath("lanes-merge.ring");
    writeLaneRing(path, { capacity: 8, lanes: [[mark(5), mark(25)], [alloc(1, 0), alloc(10, 0), alloc(20, 0), alloc(30, 0)], [alloc(2, 1), alloc(15, 1), alloc(35, 1)]] });
    const want: Array<[number, number, number]> = [[1, 0, ACTION.alloc], [2, 1, ACTION.alloc], [5, -1, ACTION.phase], [10, 0, ACTION.alloc], [15, 1, ACTION.alloc], [20, 0, ACTION.alloc], [25, -1, ACTION.phase], [30, 0, ACTION.alloc], [35, 1, ACTION.alloc]];
    for (const size of [100, 4, 1]) {
      const got = drain(path, size);
      expect(got.rows).toEqual(want);
      expect({ lost: got.lost, next: got.next, written: got.written }).toEqual({ lost: 0, next: 9, written: 9 });
    }
  });

  test("a lapped device lane counts its own lost records; the other lanes lose nothing", () => {
    const path = tmpPath("lanes-lapped.ring");
    // Device 0 wrote 20 records into 8 slots (12 lost); device 1 wrote 3; the shared lane 1.
    const dev0 = Array.from({ length: 20 }, (_, i) => alloc(100 + i, 0));
    writeLaneRing(path, { capacity: 8, lanes: [[mark(50)], dev0, [alloc(101, 1), alloc(110, 1), alloc(140, 1)]] });
    const got = drain(path, 64);
    expect(got.lost).toBe(12);
    expect(got.rows.filter((r) => r[1] === 0).map((r) => r[0])).toEqual([112, 113, 114, 115, 116, 117, 118, 119]);
    expect(got.rows.filter((r) => r[1] === 1).map((r) => r[0])).toEqual([101, 110, 140]);
    expect(got.rows.map((r) => r[0])).toEqual([50, 101, 110, 112, 113, 114, 115, 116, 117, 118, 119, 140]);
    expect({ next: got.next, written: got.written }).toEqual({ next: 24, written: 24 });
  });

  test("a record claimed but not yet published in the shared lane is waited for, while the device lanes go on", () => {
    const path = tmpPath("lanes-stall.ring");
    writeLaneRing(path, { capacity: 8, lanes: [[mark(1), mark(3, 0), mark(6)], [alloc(2, 0), alloc(4, 0)], [alloc(5, 1)]] });
    const r = openRing(path);
    const b = newEventBatch(16);
    expect(r.read(b)).toEqual({ count: 4, lost: 0 });
    expect([...b.time_us.subarray(0, 4)]).toEqual([1, 2, 4, 5]);
    expect(r.next()).toBe(4); // lane 0 stopped at its unpublished record: 1 + 2 + 1
    expect(r.read(b)).toEqual({ count: 0, lost: 0 });
    publish(path, 8, 0, 1);
    // The late record and the one behind it: older than what came before, so in a later batch.
    expect(r.read(b)).toEqual({ count: 2, lost: 0 });
    expect([...b.time_us.subarray(0, 2)]).toEqual([3, 6]);
    expect(r.next()).toBe(r.header().write_index);
    r.close();
  });

  test("a shared-lane record abandoned mid-write stops nothing once the lane has moved far past it", () => {
    const path = tmpPath("lanes-abandoned.ring");
    const shared = Array.from({ length: 4098 }, (_, i) => mark(10 + i, i === 0 ? 0 : undefined));
    writeLaneRing(path, { capacity: 8192, lanes: [shared, [alloc(1, 0)]] });
    const got = drain(path, 8192);
    expect(got.lost).toBe(1);
    expect(got.rows.length).toBe(4098);
    expect(got.rows.slice(0, 3).map((r) => r[0])).toEqual([1, 11, 12]);
  });

  test("reading while two device lanes and the shared lane are written: nothing torn, each device in order, every record read or lost once", async () => {
    const path = tmpPath("lanes-live.ring");
    const events = 100_000;
    const { child, r } = await producing(path, events, "--lanes", "--delay-us", "20");
    const b = newEventBatch(2048);
    const last = [0, 0];
    let seen = 0;
    let lost = 0;
    let torn = 0;
    let disorder = 0;
    let marks = 0;
    for (;;) {
      const done = r!.header().closed;
      const { count, lost: l } = r!.read(b);
      seen += count;
      lost += l;
      for (let i = 0; i < count; i++) {
        if (!whole(b, i)) torn++;
        const d = b.device[i]!;
        if (d < 0) marks++;
        else if (b.time_us[i]! < last[d]!) disorder++;
        else last[d] = b.time_us[i]!;
      }
      if (done && count === 0) break;
      if (count === 0) await Bun.sleep(1);
    }
    const written = Number((await new Response(child.stdout).text()).trim());
    await child.exited;
    expect({ torn, disorder }).toEqual({ torn: 0, disorder: 0 });
    expect(written).toBe(2 * events + 2 * (events / 100));
    expect(seen + lost).toBe(written);
    expect(r!.next()).toBe(written);
    expect(r!.header().write_index).toBe(written);
    expect(marks).toBeGreaterThan(0);
    for (const t of r!.header().totals) expect([t.n_alloc, t.n_free, t.allocated]).toEqual([events / 2, events / 2, 0]);
    r!.close();
  });

  test("an ABI 1 ring is one lane whatever lies where ABI 2 keeps n_lanes (it was padding)", () => {
    const path = tmpPath("lanes-abi1.ring");
    writeLaneRing(path, { capacity: 8, abi: 1, nLanes: 5, lanes: [[alloc(1, 0), mark(2), alloc(3, 0)]] });
    const got = drain(path, 16);
    expect(got.rows.map((r) => r[0])).toEqual([1, 2, 3]);
    expect({ lost: got.lost, next: got.next, written: got.written }).toEqual({ lost: 0, next: 3, written: 3 });
  });

  test("lane geometry is checked: more lanes than devices allow, or a file too short for its lanes, is refused in words", () => {
    const many = tmpPath("lanes-many.ring");
    writeLaneRing(many, { capacity: 8, nLanes: 18, lanes: [[mark(1)]] });
    expectRingError(() => openRing(many), "format", /impossible geometry .*lanes 18 of at most 17/);
    const short = tmpPath("lanes-short.ring");
    writeLaneRing(short, { capacity: 8, lanes: [[mark(1)], [alloc(2, 0)], [alloc(3, 1)]], sizedFor: 2 });
    expectRingError(() => openRing(short), "truncated", /header promises 5632 \(3 lanes of 8 records\)/);
  });
});
