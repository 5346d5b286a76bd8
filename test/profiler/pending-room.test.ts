// A run of allocator records asks Lifetimes for room for its allocs at every start (pendRoom), and
// a model fed one record at a time (an attach's seed pending, a live ring read as it comes) makes
// a run a record. Making room compacts the pending blocks (those freed or resolved leave): it must
// leave as much room again as it kept, or a phase that holds a thousand pending blocks while
// others come and go compacts them every few records.
import { expect, test } from "bun:test";
import { BlockTable } from "../../src/profiler/blocks";
import { CAT_UNRESOLVED } from "../../src/profiler/categories";
import { Lifetimes } from "../../src/profiler/lifetimes";

test("making room for a run compacts the pending blocks only as often as it moves them", () => {
  const blocks = new BlockTable();
  const lifetimes = new Lifetimes(blocks);
  // count the real compactions: the pending blocks' ids before and after each call
  let compactions = 0;
  let serial = 0;
  const pend = (alive: boolean, k: number) => {
    const before = lifetimes.pendSlot;
    const len = lifetimes.pendLen;
    lifetimes.pendRoom(1024);
    if (lifetimes.pendSlot !== before || lifetimes.pendLen !== len) compactions++;
    const slot = blocks.add(k * 512, 512, 0, 0, ++serial, 0, 0, 0, CAT_UNRESOLVED, 0);
    lifetimes.pendSlot[lifetimes.pendLen] = slot;
    lifetimes.pendSerial[lifetimes.pendLen++] = serial;
    if (!alive) blocks.forget(slot);
  };
  for (let k = 0; k < 1000; k++) pend(true, k); // alive through the phase
  for (let k = 0; k < 20_000; k++) pend(false, 1000 + k); // made and freed, a run each
  // each compaction goes over ~1,000 kept blocks: at most one per ~1,000 records
  expect(compactions).toBeLessThanOrEqual(25);
  // and none of the kept ones is lost
  const kept = new Set<number>();
  for (let k = 0; k < lifetimes.pendLen; k++) if (blocks.serial[lifetimes.pendSlot[k]!] === lifetimes.pendSerial[k]) kept.add(lifetimes.pendSerial[k]!);
  for (let s = 1; s <= 1000; s++) expect(kept.has(s)).toBe(true);
});
