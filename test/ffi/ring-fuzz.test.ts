// Fuzzing the ring reader, bounded in time: mutated and truncated rings must give a RingError or
// well-formed batches, never a crash, a hang, or a read past the file.
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { newEventBatch } from "../../src/ffi/events";
import { openRing, RingError } from "../../src/ffi/ring";
import { HEADER_SIZE } from "../../src/ffi/wire";
import { produce, tmpPath } from "../support/native";

/** A small deterministic PRNG, so that a failure can be replayed from the printed seed. */
function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s ^= s << 13), (s ^= s >>> 17), (s ^= s << 5), (s >>> 0) / 2 ** 32);
}

test("2 s of mutated rings: every one is refused clearly or read within its bounds", () => {
  const base = tmpPath("fuzz-base.ring");
  produce(base, 256, 600); // lapped: 600 records through 256 slots
  const original = readFileSync(base);
  const seed = Date.now() % 100000;
  const rand = rng(seed);
  const path = tmpPath("fuzz.ring");
  const batch = newEventBatch(128);
  const deadline = performance.now() + 2000;
  let refused = 0;
  let read = 0;
  // Mutate where it matters most: the header's fields, the records' seq words, anywhere at all.
  const hot = [8, 12, 16, 20, 24, 28, 56, 128, 129, 130, 135];
  while (performance.now() < deadline) {
    const buf = Buffer.from(original);
    const n = 1 + Math.floor(rand() * 6);
    for (let k = 0; k < n; k++) {
      const r = rand();
      let at: number;
      if (r < 0.4) at = hot[Math.floor(rand() * hot.length)]!;
      else if (r < 0.7) at = HEADER_SIZE + 64 * Math.floor(rand() * 256) + Math.floor(rand() * 8);
      else at = Math.floor(rand() * buf.length);
      buf[at] = Math.floor(rand() * 256);
    }
    const cut = rand() < 0.2 ? Math.floor(rand() * buf.length) : buf.length;
    writeFileSync(path, buf.subarray(0, cut));
    let r;
    try {
      r = openRing(path);
    } catch (e) {
      if (!(e instanceof RingError)) throw new Error(`seed ${seed}: ${e}`);
      expect((e as Error).message.length).toBeGreaterThan(10);
      refused++;
      continue;
    }
    const h = r.header();
    let total = 0;
    for (let i = 0; i < 64; i++) {
      const { count, lost } = r.read(batch);
      expect(count).toBeLessThanOrEqual(128);
      expect(lost).toBeGreaterThanOrEqual(0);
      total += count;
      if (count === 0) break;
    }
    // Never more records than the ring can hold.
    expect(total).toBeLessThanOrEqual(h.capacity);
    r.close();
    read++;
  }
  expect(refused).toBeGreaterThan(0);
  expect(read).toBeGreaterThan(0);
});
