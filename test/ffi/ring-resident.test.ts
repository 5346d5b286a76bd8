// A live ring's records, once read, are given back (cuda/ring_read.c): the monitor following a busy
// training keeps a stretch of each lane resident, not the whole lane (64 MiB at the agent's default
// capacity), and still reads every record whole, laps and a writer running meanwhile included.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { newEventBatch, type EventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { buildTool, produce, tmpPath } from "../support/native";

/** The KiB of `path`'s mappings in this process that are resident (/proc/self/smaps), less what
 *  huge pages map: where the kernel maps the file in huge pages (tmpfs with huge=, THP for shmem),
 *  it gives back a huge page whole or not at all, and the bound below is one of small pages. */
function residentKiB(path: string): number {
  let mine = false;
  let kib = 0;
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) {
      mine = line.endsWith(` ${path}`);
      if (mine) mapped.add(path);
    }
    else if (mine && line.startsWith("Rss:")) kib += Number(line.split(/\s+/)[1]);
    else if (mine && /^(ShmemPmdMapped|FilePmdMapped):/.test(line)) kib -= Number(line.split(/\s+/)[1]);
  }
  return kib;
}

/** Every record the producer writes carries extra = address ^ size ^ step: a torn record fails it. */
function torn(b: EventBatch, count: number): number {
  let n = 0;
  for (let i = 0; i < count; i++) if (Number(BigInt(b.address[i]!) ^ BigInt(b.size[i]!) ^ BigInt(b.step[i]!)) !== b.extra[i]) n++;
  return n;
}

/** The paths residentKiB found mapped: the mapping measured is the ring's. */
const mapped = new Set<string>();

// What release_read keeps at most: a mebibyte behind the cursor, the page at it, what the kernel
// maps around a fault ahead of it (fault_around_bytes: 64 KiB) where the writer is ahead, the header.
const BOUND_KIB = 1024 + 4 + 64 + 4;

test("a live ring read to its end keeps at most a mebibyte of its 8 MiB lane resident, every record read", () => {
  const path = tmpPath("resident.ring");
  const capacity = 1 << 17; // 8 MiB of records
  expect(produce(path, capacity, capacity)).toBe(capacity);
  const r = openRing(path);
  const b = newEventBatch(4096);
  let seen = 0;
  let broken = 0;
  let peak = 0;
  for (;;) {
    const { count } = r.read(b);
    if (count === 0) break;
    seen += count;
    broken += torn(b, count);
    peak = Math.max(peak, residentKiB(path));
  }
  expect({ seen, broken }).toEqual({ seen: capacity, broken: 0 });
  expect(peak).toBeLessThanOrEqual(BOUND_KIB);
  expect(mapped.has(path)).toBe(true); // the mapping measured is the ring's
  r.close();
});

test("a writer lapping a 2 MiB lane while it is read: nothing torn, every record read or counted lost once, a mebibyte resident", async () => {
  const path = tmpPath("resident-live.ring");
  const events = 150_000;
  const child = Bun.spawn([buildTool("producer"), path, String(1 << 15), String(events), "2", "--delay-us", "5"], { stdout: "pipe" });
  let r: ReturnType<typeof openRing> | null = null;
  for (let i = 0; i < 200 && !r; i++) {
    try {
      r = openRing(path);
    } catch {
      await Bun.sleep(5);
    }
  }
  if (!r) throw new Error(`the producer made no readable ring at ${path} within a second`);
  const b = newEventBatch(2048);
  let seen = 0;
  let lost = 0;
  let broken = 0;
  let peak = 0;
  for (;;) {
    const done = r.header().closed;
    const { count, lost: l } = r.read(b);
    seen += count;
    lost += l;
    broken += torn(b, count);
    peak = Math.max(peak, residentKiB(path));
    if (done && count === 0) break;
    if (count === 0) await Bun.sleep(1);
  }
  await child.exited;
  expect({ broken, all: seen + lost }).toEqual({ broken: 0, all: 2 * events });
  expect(seen).toBeGreaterThan(2 * (1 << 15)); // more than a lap read: released pages were read again
  expect(peak).toBeLessThanOrEqual(BOUND_KIB);
  r.close();
});
