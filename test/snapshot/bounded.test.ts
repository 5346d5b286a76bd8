// Hostile snapshot and ring files cost bounded time and memory, and what a snapshot states as an
// address or a size is one: each file is built here, read by the real reader in a bun process of
// its own (its peak resident memory while reading measured from /proc/self/status, the peak reset
// through clear_refs after a warm-up read of a real snapshot), and refused in one line.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { ringHeader } from "../fixtures/hostile/make";
import { expectRefused, runCli } from "../support/hostile";
import { pickle, Tuple, type PickleData } from "../../src/snapshot/pickle-write";
import { pickleMachine, unpickle } from "../../src/snapshot/pickle";
import { OBJECTS_PER_BYTE } from "../../src/snapshot/pickle-contract";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { TraceColumns } from "../../src/snapshot/trace-columns";
import { gunzipSync } from "node:zlib";

const SRC = join(import.meta.dir, "..", "..", "src");
const FIXTURES = join(import.meta.dir, "..", "fixtures", "snapshots");
const tmp = mkdtempSync(join(tmpdir(), "gpumem-bounded-"));
const MiB = 1024 ** 2;

/** Gzip members one after another (as `cat a.gz b.gz` makes): one member of `mib` MiB of zeros is
 *  compressed once and repeated, so a file that expands to 1 GiB is built in well under a second. */
function gzipMembers(...parts: Uint8Array[]): Uint8Array {
  return Buffer.concat(parts.map((p) => gzipSync(p, { level: 9 })));
}
function repeatedMember(bytes: Uint8Array, times: number): Uint8Array {
  const member = gzipSync(bytes, { level: 9 });
  return Buffer.concat(Array.from({ length: times }, () => member));
}

function write(name: string, data: Uint8Array): string {
  const f = join(tmp, name);
  writeFileSync(f, data);
  return f;
}

interface Measured {
  said: string;
  seconds: number;
  grewMiB: number;
}

/** `file` read by `readSnapshotFile` in a bun process of its own, after a warm-up read of a real
 *  snapshot: what it said, how long the read took, and how far its peak resident memory rose
 *  above what it held before (VmHWM after, less VmRSS before, the peak reset). */
function measured(file: string, timeoutMs = 20_000): Measured {
  const script = `
    const { readSnapshotFile } = await import(${JSON.stringify(join(SRC, "snapshot/read.ts"))});
    const { readFileSync, writeFileSync } = await import("node:fs");
    const kib = (k) => Number(readFileSync("/proc/self/status", "utf8").match(new RegExp(k + ":\\\\s+(\\\\d+)"))[1]);
    await readSnapshotFile(${JSON.stringify(join(FIXTURES, "oom.pickle.gz"))});
    Bun.gc(true);
    writeFileSync("/proc/self/clear_refs", "5");
    const before = kib("VmRSS");
    const t0 = performance.now();
    let said = "read";
    try { await readSnapshotFile(${JSON.stringify(file)}); } catch (e) { said = e.message; }
    console.log(JSON.stringify({ said, seconds: (performance.now() - t0) / 1000, grewMiB: (kib("VmHWM") - before) / 1024 }));`;
  const p = Bun.spawnSync(["bun", "-e", script], { stdout: "pipe", stderr: "pipe", timeout: timeoutMs });
  expect({ signal: p.signalCode ?? null, code: p.exitCode, err: p.stderr.toString() }).toEqual({ signal: null, code: 0, err: "" });
  return JSON.parse(p.stdout.toString()) as Measured;
}

describe("gzip bombs", () => {
  test("a 1 MB .pickle.gz of one 255 MiB string is refused within 1 s and 64 MiB (it took 22 s and 1.4 GB)", () => {
    // PROTO 4, BINUNICODE8 of 255 MiB, then 1 GiB of zeros: the reader waited for the string,
    // copying what it had for every chunk, and the cap (256 MiB) let it be held whole.
    const head = new Uint8Array(11);
    head.set([0x80, 4, 0x8d]);
    new DataView(head.buffer).setBigUint64(3, BigInt(255 * MiB), true);
    const f = write("string-bomb.pickle.gz", Buffer.concat([gzipMembers(head), repeatedMember(new Uint8Array(16 * MiB), 64)]));
    expect(readFileSync(f).length).toBeGreaterThan(0.9 * MiB);
    const m = measured(f);
    expect(m.said).toMatch(/an item of 267386880 bytes: a length past any real file \(a string or bytes of 4194304 at most\)/);
    expect(m.seconds).toBeLessThan(1);
    expect(m.grewMiB).toBeLessThan(64);
    expectRefused(runCli(["view", f, "--json"]), f, /an item of 267386880 bytes/);
  }, 30_000);

  test("a .ring.gz whose bomb follows 300 KB of empty gzip members is refused at its header within 128 MiB (it took 1.5 GB)", () => {
    // The header was looked for in longer and longer prefixes, each inflated without a cap: the
    // empty members hid the bomb until a prefix of 1 MB inflated 700 MiB.
    const empty = gzipSync(new Uint8Array(0));
    const pad = Buffer.concat(Array.from({ length: Math.ceil(300_000 / empty.length) }, () => empty));
    const header = ringHeader({ capacity: 1 << 26, writeIndex: 1n << 26n });
    const f = write("late-bomb.ring.gz", Buffer.concat([pad, gzipMembers(header), repeatedMember(new Uint8Array(16 * MiB), 44)]));
    const o = runCli(["replay", f, "--json"]);
    expectRefused(o, f, /its header promises 4294971392 bytes: it expands past 256 MiB/, { seconds: 3, mib: 128 });
  });
});

describe("memo and object growth", () => {
  test("a 61 KB .pickle.gz memoizing 21 million empty dicts is refused by its objects a byte, within 256 MiB (it took 1.66 GB)", () => {
    // PROTO 4, (EMPTY_DICT MEMOIZE POP) × 21 million, then {"segments": []}: a valid, empty snapshot.
    const unit = new Uint8Array(3 * 2 ** 22);
    for (let i = 0; i < unit.length; i += 3) unit.set([0x7d, 0x94, 0x30], i);
    const tail = new Uint8Array([0x7d, 0x8c, 8, ...new TextEncoder().encode("segments"), 0x5d, 0x73, 0x2e]);
    const f = write("memo-bomb.pickle.gz", Buffer.concat([gzipMembers(new Uint8Array([0x80, 4])), repeatedMember(unit, 5), gzipMembers(tail)]));
    const size = readFileSync(f).length;
    const m = measured(f);
    const limit = OBJECTS_PER_BYTE * size;
    expect(m.said).toContain(`the snapshot builds more than ${limit} objects from its ${size} bytes (${OBJECTS_PER_BYTE} a byte, 1000000 for a small file, at most): refused as hostile or corrupt`);
    expect(m.grewMiB).toBeLessThan(256);
    expect(m.seconds).toBeLessThan(5);
  }, 30_000);

  test("every real snapshot holds at most 1.5 objects a compressed byte at once: the limit is 20 times that", async () => {
    for (const name of ["compile-graphs", "expandable", "leak", "midrun", "oom", "resnet-no-zero-grad", "stacks-all", "stacks-python"]) {
      const gz = new Uint8Array(readFileSync(join(FIXTURES, `${name}.pickle.gz`)));
      const data = gunzipSync(gz);
      const m = pickleMachine(undefined, new TraceColumns());
      let peak = 0;
      for (let at = 0; at < data.length; at += 64 * 1024) {
        m.feed(data.subarray(at, at + 64 * 1024), at + 64 * 1024 >= data.length);
        peak = Math.max(peak, m.objects);
      }
      expect(peak / gz.length).toBeLessThan(1.5);
      expect(() => parseSnapshotBytes(gz)).not.toThrow();
    }
    expect(OBJECTS_PER_BYTE / 1.5).toBeGreaterThan(20);
  });

  test("10 million MARKs in a 10 KB .pickle.gz are refused at a million on the stack", () => {
    const marks = new Uint8Array(10_000_000).fill(0x28);
    const f = write("marks.pickle.gz", gzipMembers(new Uint8Array([0x80, 4]), marks));
    const m = measured(f);
    expect(m.said).toMatch(/more than 1000000 items on the stack/);
    expect(m.grewMiB).toBeLessThan(128); // 46 MiB here; 10 million of them held 280 MB
  }, 30_000);

  test("a 4 MiB string fed 256 bytes at a time through two buffers in turn is read whole, in linear time", () => {
    // Each chunk used to be joined to all the string's bytes before it: 16,384 copies of 2 MiB.
    // Two buffers in turn, as feedPlain reads a file: the one the string began in is overwritten
    // two chunks later, while the string still waits for its end. Linear is counted, not timed
    // (a time depends on the machine): the bytes copied by Uint8Array's set, the machine's joins
    // and this loop's own copies in, against the file's size.
    const text = "x".repeat(4 * MiB - 64) + "the end";
    const file = pickle({ s: text });
    const m = pickleMachine();
    const bufs = [new Uint8Array(256), new Uint8Array(256)];
    let value: unknown;
    let copied = 0;
    const set = Uint8Array.prototype.set;
    Uint8Array.prototype.set = function (this: Uint8Array, src: ArrayLike<number>, offset?: number) {
      copied += src.length;
      return set.call(this, src, offset);
    };
    try {
      for (let at = 0, k = 0; at < file.length; at += 256, k ^= 1) {
        const buf = bufs[k]!;
        const n = Math.min(buf.length, file.length - at);
        buf.set(file.subarray(at, at + n));
        value = m.feed(buf.subarray(0, n), at + n >= file.length);
      }
    } finally {
      Uint8Array.prototype.set = set;
    }
    expect((value as { s: string }).s === text).toBe(true);
    expect(copied).toBeLessThan(4 * file.length); // the old joins: about 8,000 times it
  });

  test("LONG4 of a negative length is refused, not read again and again", () => {
    const p = new Uint8Array([0x80, 2, 0x8b, 0xfb, 0xff, 0xff, 0xff, 0x2e]);
    expect(() => unpickle(p)).toThrow(/an integer of -5 bytes: no snapshot holds one/);
  });
});

/** A snapshot of `segments` (and a trace, where given) as the real writer pickles it. */
function snapshotFile(name: string, segments: PickleData[], trace: PickleData[] = []): string {
  return write(name, pickle({ segments, device_traces: [trace], allocator_settings: {} }));
}
const segment = (address: bigint | number, total: number, blocks?: PickleData[]): PickleData => ({
  device: 0,
  address,
  total_size: total,
  allocated_size: 0,
  active_size: 0,
  requested_size: 0,
  stream: 0,
  segment_type: "large",
  segment_pool_id: new Tuple([0, 0]),
  is_expandable: false,
  frames: [],
  blocks: blocks ?? [{ address, size: total, requested_size: 0, state: "inactive", frames: [] }],
});

describe("addresses and sizes", () => {
  test("segments at 2^60 and 2^60 + 1 are refused, naming the field (they printed one address)", () => {
    const f = snapshotFile("2-60.pickle", [segment(2n ** 60n, 2 * MiB), segment(2n ** 60n + 1n, 2 * MiB)]);
    expectRefused(runCli(["view", f, "--json"]), f, /segments\[0\]\.address is 2\^53 or more: an address or size is a whole number of bytes under 2\^53; refused as hostile or corrupt$/);
  });

  test("a segment of 2^64 bytes, a block of 2^60 and a trace entry at 2^60 are refused", () => {
    const reserved = snapshotFile("2-64.pickle", [segment(0x7f0000000000, 2 * MiB, []), { ...(segment(0x7f0000200000, 0, []) as object), total_size: 2n ** 64n }]);
    expectRefused(runCli(["view", reserved, "--json"]), reserved, /segments\[1\]\.total_size is 2\^53 or more/);
    const block = snapshotFile("block-2-60.pickle", [segment(0x7f0000000000, 2 * MiB, [{ address: 0x7f0000000000, size: 2n ** 60n, requested_size: 0, state: "inactive", frames: [] }])]);
    expectRefused(runCli(["view", block, "--json"]), block, /segments\[0\]\.blocks\[0\]\.size is 2\^53 or more/);
    const entry = snapshotFile("entry-2-60.pickle", [], [{ action: "alloc", addr: 2n ** 60n, size: 512, stream: 0, time_us: 1, frames: [] }]);
    expectRefused(runCli(["view", entry, "--json"]), entry, /trace entry 0 \(alloc\): addr is 2\^53 or more/);
  });

  test("integers of 7 and 8 bytes are decoded exactly up to 2^53", () => {
    for (const v of [2n ** 53n - 1n, -(2n ** 52n + 1n), -(2n ** 53n - 1n), 2n ** 47n + 3n, -(2n ** 47n + 3n)]) expect(unpickle(pickle(v))).toBe(Number(v));
    expect(unpickle(pickle(2n ** 64n - 1n))).toBe(2 ** 64); // a frame's unknown line: read, not exact
  });

  test("overlapping segments, a block outside its segment and overlapping blocks are refused in one line", () => {
    const a = 0x7f0000000000;
    const segs = snapshotFile("overlap.pickle", [segment(a, 2 * MiB), segment(a + MiB, 2 * MiB)]);
    expectRefused(runCli(["view", segs, "--json"]), segs, /segments\[0\] \[0x7f0000000000, 0x7f0000200000\) and segments\[1\] \[0x7f0000100000, 0x7f0000300000\) overlap on device 0; refused as hostile or corrupt$/);
    const outside = snapshotFile("outside.pickle", [segment(a, 2 * MiB, [{ address: a + MiB, size: 2 * MiB, requested_size: 0, state: "inactive", frames: [] }])]);
    expectRefused(runCli(["view", outside, "--json"]), outside, /segments\[0\]\.blocks\[0\] \[0x7f0000100000, 0x7f0000300000\) lies outside its segment \[0x7f0000000000, 0x7f0000200000\)/);
    const blocks = snapshotFile("blocks.pickle", [
      segment(a, 2 * MiB, [
        { address: a, size: MiB, requested_size: 0, state: "active_allocated", frames: [] },
        { address: a + 512, size: MiB, requested_size: 0, state: "active_allocated", frames: [] },
      ]),
    ]);
    expectRefused(runCli(["view", blocks, "--json"]), blocks, /segments\[0\]\.blocks\[0\] .* and segments\[0\]\.blocks\[1\] .* overlap; refused/);
    // The same segments on two devices are no overlap.
    const two = snapshotFile("two-devices.pickle", [segment(a, 2 * MiB), { ...(segment(a, 2 * MiB) as object), device: 1 }]);
    expect(runCli(["view", two, "--json"]).code).toBe(0);
  });
});
