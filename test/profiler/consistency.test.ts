// Block detail against torch's own figures at the same point of the stream (sync records), and
// never against the live header, which runs ahead of the records a reader has taken.
import { describe, expect, test } from "bun:test";
import { SYNC_UNSURE, type RingHeader } from "../../src/ffi/events";
import { createModel, findings, steps, summary } from "../../src/profiler";
import { MiB, Trace } from "./trace";

function liveHeader(allocated: number, closed = false): RingHeader {
  const t = { device: 0, allocated, reserved: 64 * MiB, active: allocated, peak_allocated: allocated, peak_reserved: 64 * MiB, peak_active: allocated };
  return {
    abi_version: 1, capacity: 1024, pid: 7, mode: "hook", n_devices: 1, attach_unix_us: 0, updated_unix_us: 0,
    current_step: 0, current_range: 0, current_line: 0, current_phase: 0, closed, write_index: 0,
    totals: [{ ...t, n_alloc: 0, n_free: 0, n_segment_alloc: 0, n_segment_free: 0, n_oom: 0, n_retries: 0, requested: allocated }],
  };
}

/** A step of a loop: 3 allocations, 2 freed, then torch's figures as the hook writes them at the step mark. */
function step(tr: Trace, base: number, events: { n: number }, held: { bytes: number }): Trace {
  tr.alloc(base, 2 * MiB).alloc(base + 2 * MiB, 3 * MiB).alloc(base + 5 * MiB, 1 * MiB);
  tr.free(base, 2 * MiB).free(base + 2 * MiB, 3 * MiB);
  events.n += 5;
  held.bytes += 1 * MiB;
  tr.sync(held.bytes, 64 * MiB, held.bytes, 1000 + events.n);
  return tr.nextStep();
}

describe("consistency at sync records", () => {
  test("a busy process read mid-stream is never called partial by the live header", () => {
    const tr = new Trace().segment(0x1000_0000, 64 * MiB).sync(0, 64 * MiB, 0, 1000);
    const events = { n: 0 };
    const held = { bytes: 0 };
    for (let s = 0; s < 4; s++) step(tr, 0x1000_0000 + s * 8 * MiB, events, held);
    const m = createModel();
    // the reader has taken half the records; the header already counts much more (and earlier, less)
    const half = Math.floor(tr.rows.length / 2);
    m.ingest(tr.batch(0, half));
    for (const ahead of [900 * MiB, 0]) {
      m.setHeader(liveHeader(ahead));
      const d = summary(m).devices[0]!;
      expect(d.partial).toBe(false);
      expect(d.partial_causes).toEqual([]);
      expect(findings(m).map((f) => f.id)).not.toContain("partial");
    }
    m.ingest(tr.batch(half));
    const d = summary(m).devices[0]!;
    expect(d.sync).toMatchObject({ checks: 5, agreed: 5, disagreed: 0, skipped: 0 });
    expect(d.sync.last).toMatchObject({ torch_allocated_bytes: 4 * MiB, block_bytes: 4 * MiB, unaccounted_bytes: 0, requested_difference_bytes: 0, agreed: true });
    // every step knows torch's allocated at its boundary, and the blocks held the same
    const done = steps(m).steps.filter((s) => s.complete);
    expect(done.map((s) => s.torch_allocated_at_end_bytes)).toEqual([1, 2, 3, 4].map((k) => k * MiB));
    expect(done.map((s) => s.held_at_end_bytes)).toEqual([1, 2, 3, 4].map((k) => k * MiB));
  });

  test("an allocation that raced the read, or a count that does not match, is skipped, not a disagreement", () => {
    const tr = new Trace().sync(0, 0, 0, 50).alloc(0x1000, 1 * MiB);
    tr.sync(9 * MiB, 0, 9 * MiB, SYNC_UNSURE); // the hook saw an event while it read
    tr.sync(9 * MiB, 0, 9 * MiB, 53); // another thread's records land after this sync
    const m = createModel();
    m.ingest(tr.batch());
    const d = summary(m).devices[0]!;
    expect(d.sync).toMatchObject({ checks: 1, skipped: 2, disagreed: 0 });
    expect(d.partial).toBe(false);
  });

  test("blocks that do not add up to torch's allocated at the same point are partial, and say by how much", () => {
    const tr = new Trace().sync(0, 0, 0, 0).alloc(0x1000, 1 * MiB).sync(5 * MiB, 0, 1 * MiB, 1);
    const m = createModel();
    m.ingest(tr.batch());
    const d = summary(m).devices[0]!;
    expect(d.partial).toBe(true);
    expect(d.unaccounted_bytes).toBe(4 * MiB);
    expect(d.partial_causes).toEqual(["at step 0 torch counted 5.00 MiB allocated, the blocks 1.00 MiB"]);
  });

  test("a large block may hold up to 1 MiB more than its request: within that, detail is whole", () => {
    // 11 MiB asked, a 12 MiB block handed out (the remainder of 1 MiB is not split off)
    const tr = new Trace().sync(0, 0, 0, 0).alloc(0x1000, 11 * MiB).sync(12 * MiB, 12 * MiB, 11 * MiB, 1);
    const m = createModel();
    m.ingest(tr.batch());
    expect(summary(m).devices[0]).toMatchObject({ partial: false, unaccounted_bytes: 1 * MiB });
  });

  test("requested bytes that differ mean a record was missed, whatever allocated says", () => {
    const tr = new Trace().sync(0, 0, 0, 0).alloc(0x1000, 1 * MiB).sync(1 * MiB, 0, 1 * MiB + 512, 1);
    const m = createModel();
    m.ingest(tr.batch());
    expect(summary(m).devices[0]!.partial_causes[0]).toContain("requested bytes differ by 512 B");
  });

  test("memory from before the attach is a named cause until its frees are seen", () => {
    // torch held 8 MiB when the hook attached; the records then free 2 MiB of it
    const tr = new Trace().sync(8 * MiB, 8 * MiB, 8 * MiB, 20).alloc(0x9000_0000, 1 * MiB).free(0x1000, 2 * MiB);
    tr.sync(7 * MiB, 8 * MiB, 7 * MiB, 22);
    const m = createModel();
    m.ingest(tr.batch());
    const d = summary(m).devices[0]!;
    expect(d.before_attach_bytes).toBe(6 * MiB);
    expect(d.sync).toMatchObject({ checks: 2, agreed: 2 });
    expect(d.partial_causes).toEqual(["6.00 MiB allocated before the agent attached", "1 frees of blocks allocated before the recording (2.00 MiB)"]);
  });

  test("records before the first sync (another thread allocated between the tracker and the attach's sync): the rest is from before, and later syncs agree", () => {
    // torch held 8 MiB before; a communicator's 1 MiB lands before the attach's sync, which counts 9
    const tr = new Trace().alloc(0x9000_0000, 1 * MiB).sync(9 * MiB, 16 * MiB, 9 * MiB, 21);
    tr.alloc(0x9010_0000, 1 * MiB).free(0x1000, 2 * MiB).sync(8 * MiB, 16 * MiB, 8 * MiB, 23);
    const m = createModel();
    m.ingest(tr.batch());
    const d = summary(m).devices[0]!;
    expect(d.before_attach_bytes).toBe(6 * MiB);
    expect(d.sync).toMatchObject({ checks: 2, agreed: 2, disagreed: 0 });
    expect(d.sync.last).toMatchObject({ unaccounted_bytes: 0, requested_difference_bytes: 0 });
  });

  test("a ring that lapped before the first record read: records lost is the cause, and the syncs after it agree", () => {
    // The reader's first records: the free of a 4 MiB block it never saw, then a sync; 4 MiB of
    // what torch holds came in the lost records (or before the attach), and 2 MiB large blocks
    // stand for rounding the records cannot see.
    const tr = new Trace().free(0x7000_0000, 4 * MiB).alloc(0x9000_0000, 2 * MiB).sync(6 * MiB, 16 * MiB, 6 * MiB, 500);
    tr.free(0x9000_0000, 2 * MiB).sync(4 * MiB, 16 * MiB, 4 * MiB, 501);
    const m = createModel();
    m.ingest(tr.batch(), 1000);
    const d = summary(m).devices[0]!;
    expect(d.partial_causes[0]).toBe("1000 records lost (the ring lapped)");
    expect(d.partial_causes[1]).toBe("4.00 MiB allocated in records lost before the first sync, or before the agent attached");
    expect(d.sync).toMatchObject({ checks: 2, agreed: 2, disagreed: 0 });
  });

  test("after lost records the next sync re-anchors the counts, the one after compares again", () => {
    const tr = new Trace().sync(0, 0, 0, 0).alloc(0x1000, 1 * MiB).alloc(0x2000_0000, 1 * MiB);
    tr.sync(2 * MiB, 0, 2 * MiB, 2).alloc(0x3000_0000, 1 * MiB).sync(3 * MiB, 0, 3 * MiB, 3);
    const m = createModel();
    m.ingest(tr.batch(0, 2));
    m.ingest(tr.batch(3, tr.rows.length), 1); // one alloc lost
    const d = summary(m).devices[0]!;
    expect(d.sync).toMatchObject({ checks: 2, skipped: 1 });
    expect(d.partial_causes[0]).toBe("1 records lost (the ring lapped)");
  });

  test("a closed ring's final header is compared at the end of its stream (recordings replayed to the end)", () => {
    const tr = new Trace().alloc(0x1000, 1 * MiB);
    const m = createModel();
    m.ingest(tr.batch());
    m.setHeader(liveHeader(1 * MiB, true), { streamEnd: true });
    expect(summary(m).devices[0]).toMatchObject({ partial: false, unaccounted_bytes: 0, sync: { checks: 1, agreed: 1 } });
  });
});
