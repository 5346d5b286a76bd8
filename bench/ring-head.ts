#!/usr/bin/env bun
// The head of a recorded ring as a ring of its own, small enough for a test fixture:
//   bun bench/ring-head.ts IN OUT N [--keep-totals]
// copies IN's header and its first N records (all of them where it has fewer) into OUT, whose
// capacity is the next power of two ≥ N and whose write_index is N (the layout: cuda/gpumem_ring.h,
// src/ffi/ring.ts LAYOUT). The header's per-device totals are those of the whole recording's end;
// unless --keep-totals, they are recomputed from the records kept (block sizes as the allocator
// rounds them, segments, counts, peaks), so that a replay of the head ends on totals that belong to
// it. A ring that lapped has lost its first records: refused.
import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { HEADER_SIZE, LAYOUT, MAX_DEVICES, RECORD_SIZE } from "../src/ffi/ring";
import { RING_MAGIC } from "../src/ffi/events";
import { blockSize } from "../src/profiler/device";

const USAGE = "usage: bun bench/ring-head.ts IN OUT N [--keep-totals]\n";
const argv = process.argv.slice(2);
const keepTotals = argv.includes("--keep-totals");
const [input, output, count] = argv.filter((a) => a !== "--keep-totals");
if (!input || !output || !count || !/^\d+$/.test(count) || argv.length > 4) {
  process.stderr.write(USAGE);
  process.exit(2);
}

const fail = (msg: string): never => {
  process.stderr.write(`ring-head: ${msg}\n`);
  process.exit(1);
};
const src = openSync(input, "r");
const header = Buffer.alloc(HEADER_SIZE);
if (readSync(src, header, 0, HEADER_SIZE, 0) !== HEADER_SIZE || header.toString("latin1", 0, 8) !== RING_MAGIC) fail(`${input} is not a gpumem-tui ring`);
const capacity = Number(header.readBigUInt64LE(LAYOUT.capacity));
const written = Number(header.readBigUInt64LE(LAYOUT.write_index));
if (written > capacity) fail(`${input} lapped (${written} records written into ${capacity}): its first ${written - capacity} records are gone`);
const n = Math.min(Number(count), written);
let cap = 1;
while (cap < n) cap *= 2;
header.writeBigUInt64LE(BigInt(cap), LAYOUT.capacity);
header.writeBigUInt64LE(BigInt(n), LAYOUT.write_index);

// Totals of the records kept, per device (the fields of gpumem_totals, in order).
const FIELDS = ["allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active", "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom"] as const;
type Totals = Record<(typeof FIELDS)[number], number> & { requested: number; live: Map<number, number>; freeing: Map<number, number> };
const totals = new Map<number, Totals>();
function of(device: number): Totals {
  let t = totals.get(device);
  if (!t) totals.set(device, (t = { ...(Object.fromEntries(FIELDS.map((f) => [f, 0])) as Record<(typeof FIELDS)[number], number>), requested: 0, live: new Map(), freeing: new Map() }));
  return t;
}

const out = openSync(output, "w", 0o644);
writeSync(out, header); // again at the end, with the totals
const CHUNK = 1 << 16;
const buf = Buffer.alloc(CHUNK * RECORD_SIZE);
let torn = 0;
for (let i = 0; i < n; i += CHUNK) {
  const k = Math.min(CHUNK, n - i);
  if (readSync(src, buf, 0, k * RECORD_SIZE, HEADER_SIZE + i * RECORD_SIZE) !== k * RECORD_SIZE) fail(`${input} is shorter than its header says`);
  for (let j = 0; j < k; j++) {
    const o = j * RECORD_SIZE;
    if (Number(buf.readBigUInt64LE(o)) !== i + j + 1) {
      torn++;
      continue;
    }
    const address = Number(buf.readBigUInt64LE(o + 16));
    const size = Number(buf.readBigUInt64LE(o + 24));
    const action = buf[o + 56]!;
    const device = buf.readInt8(o + 57);
    if (device < 0 || device >= MAX_DEVICES || action > 8) continue;
    const t = of(device);
    if (action === 0) {
      const b = blockSize(size);
      t.live.set(address, b);
      t.allocated += b;
      t.active += b;
      t.requested += size;
      t.n_alloc++;
    } else if (action === 1) {
      const b = t.live.get(address) ?? blockSize(size);
      t.live.delete(address);
      t.freeing.set(address, b);
      t.allocated -= b;
      t.requested -= size;
      t.n_free++;
    } else if (action === 2) {
      t.active -= t.freeing.get(address) ?? blockSize(size);
      t.freeing.delete(address);
    } else if (action === 3 || action === 5) {
      t.reserved += size;
      if (action === 3) t.n_segment_alloc++;
    } else if (action === 4 || action === 6) {
      t.reserved -= size;
      if (action === 4) t.n_segment_free++;
    } else if (action === 8) t.n_oom++;
    t.peak_allocated = Math.max(t.peak_allocated, t.allocated);
    t.peak_active = Math.max(t.peak_active, t.active);
    t.peak_reserved = Math.max(t.peak_reserved, t.reserved);
  }
  writeSync(out, buf, 0, k * RECORD_SIZE, HEADER_SIZE + i * RECORD_SIZE);
}
closeSync(src);
if (!keepTotals) {
  for (const [device, t] of totals) {
    const base = LAYOUT.totals + device * LAYOUT.totals_size;
    FIELDS.forEach((f, i) => header.writeBigInt64LE(BigInt(t[f]), base + 8 * i));
    header.writeBigInt64LE(BigInt(t.requested), base + 8 * 12); // n_retries (11) stays: no event says it
  }
}
writeSync(out, header, 0, HEADER_SIZE, 0);
// The rest of the capacity, zeros (never read: write_index says where the records end).
if (cap > n) writeSync(out, Buffer.alloc(1), 0, 1, HEADER_SIZE + cap * RECORD_SIZE - 1);
closeSync(out);
const figures = { input, output, records: n, of: written, capacity: cap, torn_records: torn, totals: keepTotals ? "kept (the whole recording's)" : Object.fromEntries([...totals].map(([d, t]) => [d, { allocated: t.allocated, reserved: t.reserved, n_alloc: t.n_alloc }])) };
process.stdout.write(`${JSON.stringify(figures)}\n`);
