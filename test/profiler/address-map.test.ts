// The model's address table agrees with a JS Map through a long random run of inserts, lookups and
// deletes (clustered addresses, as the allocator hands them out, so probe runs collide and wrap).
import { expect, test } from "bun:test";
import { AddressMap } from "../../src/profiler/address-map";

test("AddressMap behaves like a Map under random inserts and deletes, through growth", () => {
  let seed = 12345;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
  const ours = new AddressMap(8);
  const ref = new Map<number, number>();
  const pool: number[] = [];
  for (let k = 0; k < 20_000; k++) pool.push(0x7f00_0000_0000 + Math.floor(rand() * 4096) * 512 + (k % 3) * 2 ** 40);
  for (let op = 0; op < 300_000; op++) {
    const a = pool[Math.floor(rand() * pool.length)]!;
    const r = rand();
    if (r < 0.45) {
      ours.set(a, op);
      ref.set(a, op);
    } else if (r < 0.9) {
      expect(ours.delete(a)).toBe(ref.delete(a));
    } else expect(ours.get(a)).toBe(ref.get(a));
    if (op % 50_000 === 0) expect(ours.size).toBe(ref.size);
  }
  expect(ours.size).toBe(ref.size);
  for (const [a, v] of ref) expect(ours.get(a)).toBe(v);
  expect([...ours.values()].sort((x, y) => x - y)).toEqual([...ref.values()].sort((x, y) => x - y));
});
