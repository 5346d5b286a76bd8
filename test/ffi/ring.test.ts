// The ring reader on rings written by a real C producer through the same header as the hook.
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { ACTION, newEventBatch, RING_MAGIC, type EventBatch } from "../../src/ffi/events";
import { openRing, RingError } from "../../src/ffi/ring";
import { HEADER_SIZE, RECORD_SIZE } from "../../src/ffi/wire";
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
    const child = Bun.spawn([buildTool("producer"), path, "4096", String(events), "2", "--delay-us", "20"], { stdout: "pipe" });
    let r = null;
    for (let i = 0; i < 200 && !r; i++) {
      try {
        r = openRing(path);
      } catch {
        await Bun.sleep(5);
      }
    }
    expect(r).not.toBeNull();
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

  test("a ring of another ABI version names both versions", () => {
    const path = tmpPath("abi2.ring");
    produce(path, 64, 10, "--abi", "2");
    expectRingError(() => openRing(path), "version", /ABI version 2, this monitor reads version 1/);
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
