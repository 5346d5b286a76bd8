// Whether an NVML read and torch's reserved beside it are of one moment: the ring header read on
// either side of it (src/collect/same-moment.ts). The headers are a recorded H200 ring's
// (test/fixtures/ledger/gpt2.ring.gz); the second read is that header after one more 2 MiB segment,
// as the hook's live totals count it (gpumem_totals_apply: reserved and n_segment_alloc).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import type { RingHeader } from "../../src/ffi/events";
import { openRingBuffer } from "../../src/ffi/ring";
import { headerNow, reservedStill } from "../../src/collect/same-moment";
import type { Agent } from "../../src/collect/agents";

const ringPath = join(ROOT, "test", "fixtures", "ledger", "gpt2.ring.gz");
const reader = openRingBuffer(Bun.gunzipSync(readFileSync(ringPath)), ringPath, { fold: true });
const before = reader.header();
const again = reader.header();
const segment = (h: RingHeader): RingHeader => ({ ...h, totals: h.totals.map((t) => ({ ...t, reserved: t.reserved + 2 * 2 ** 20, n_segment_alloc: t.n_segment_alloc + 1 })) });

test("two reads with no segment between are one moment; a segment reserved between is not", () => {
  expect(reservedStill(before, again, 0)).toBe(true);
  expect(reservedStill(before, segment(before), 0)).toBe(false);
});

test("a device neither header has is one moment (nothing reserved there); a missing header is not known to be", () => {
  expect(reservedStill(before, again, 3)).toBe(true);
  expect(reservedStill(null, again, 0)).toBe(false);
  expect(reservedStill(before, null, 0)).toBe(false);
});

test("headerNow reads the ring again; an exited agent's is its last; an agent without a ring has none", () => {
  const agent = { pid: before.pid, exited: false, ring: reader, header: before } as unknown as Agent;
  expect(headerNow(agent)?.totals).toEqual(before.totals);
  expect(headerNow({ ...agent, exited: true, ring: null })).toBe(before);
  expect(headerNow({ ...agent, ring: null })).toBeNull();
});
