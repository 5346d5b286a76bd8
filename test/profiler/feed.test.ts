// One way into a model: a live ring's bounded feeds, a replay's states, a replay to its end and a
// snapshot's view all go through feed, and every committed recording and snapshot ends on the same
// document whichever way it is read; every column of a source reaches the model.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { newEventBatch, type RingHeader } from "../../src/ffi/events";
import { openRingRecording, openRecording } from "../../src/collect/recording";
import { batchSource, createModel, feed, FeedSource, finalLine, processProfile, replay, replayToEnd, type EventSource, type ProfilerModel, type ReplayLine } from "../../src/profiler";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";
import { snapshotFromModel } from "../../src/snapshot/from-model";
import { MiB, Trace } from "./trace";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const RINGS = ["normal.ring", "hf-gpt2.ring", "oom.ring", "kept-loss-graph.ring", "no-zero-grad.ring", "normal-history.ring", "hf-gpt2-leak.ring.gz", "../../demo/demo.ring.gz"];
const SNAPSHOTS = ["normal-history.pickle", ...["expandable", "leak", "midrun", "no-zero-grad", "oom", "stacks-all", "stacks-python"].map((n) => `snapshots/${n}.pickle.gz`)];

/** Everything a view, the JSON and a written snapshot show of a model. */
function document(m: ProfilerModel) {
  const s = snapshotFromModel(m);
  return {
    final: finalLine(m),
    profiles: m.devices.map((d) => processProfile(m, { device: d.device })),
    trace: s.device_traces.map((t) => t.map((e) => `${e.action} ${e.addr} ${e.size} ${e.time_us}`)),
    segments: s.segments,
  };
}

async function lastOf(lines: AsyncGenerator<ReplayLine>): Promise<void> {
  for await (const _ of lines) {
    // the states: only the end matters here
  }
}

/** A live monitor's way: a bounded feed per tick from one shared batch, read into the model's
 *  trace in place (src/collect/live.ts), the header read each tick. */
function fedLive(source: EventSource, ranges: Record<string, string>): ProfilerModel {
  const m = createModel().keepTrace(1_000_000);
  m.setRanges(ranges);
  const batch = newEventBatch(4096);
  for (;;) {
    const fed = feed(m, new FeedSource(source, batch, m.tail), { records: 10_000 });
    m.setHeader(source.header(), { totals: false });
    if (fed.stop === "end") break;
  }
  m.setHeader(source.header(), { streamEnd: true });
  return m;
}

describe("every committed recording ends the same, however it is fed", () => {
  for (const name of RINGS) {
    test(name, async () => {
      const path = join(FIXTURES, name);
      const inStates = createModel().keepTrace(1_000_000);
      const a = openRingRecording(path);
      await lastOf(replay(a.source, { ranges: a.ranges, model: inStates, state_every_us: 50_000, batch_size: 4096 }));
      const b = openRingRecording(path);
      const atOnce = replayToEnd(b.source, { ranges: b.ranges, model: createModel().keepTrace(1_000_000) });
      const c = openRingRecording(path);
      const live = fedLive(c.source, c.ranges);
      const want = document(inStates);
      expect(document(atOnce)).toEqual(want);
      expect(document(live)).toEqual(want);
      for (const r of [a, b, c]) r.close();
    });
  }
});

describe("a trace read into in place holds the records read, in order", () => {
  const TAIL_COLUMNS = ["time_us", "action", "device", "phase", "address", "size", "stream", "extra", "step", "range", "line", "stack"] as const;
  // A trace of 5,000 records read 4,096 at a time wraps inside a window (its window is cut at the
  // wrap), as does the small lapped ring's (300, read 128 at a time); the feeds stop at recorded
  // moments, so a window is pushed in several pieces. Every record the source
  // gave is copied aside as it is read: the trace must hold the newest of them, each where its
  // number says, and the model must end where a model fed by copying ends.
  for (const [name, path, capacity, batchSize] of [
    ["hf-gpt2.ring", join(FIXTURES, "hf-gpt2.ring"), 5_000, 4096],
    ["lapped.ring", join(FIXTURES, "..", "profiler", "fixtures", "rings", "lapped.ring"), 300, 128],
  ] as const) {
    test(name, () => {
      const fedBy = (inPlace: boolean) => {
        const r = openRingRecording(path);
        const read: Record<string, number>[] = [];
        const source: EventSource = {
          header: () => r.source.header(),
          read(batch, until) {
            const got = r.source.read(batch, until);
            for (let i = 0; i < got.count; i++) read.push(Object.fromEntries(TAIL_COLUMNS.map((c) => [c, batch[c][i]!])));
            return got;
          },
        };
        const m = createModel().keepTrace(capacity);
        m.setRanges(r.ranges);
        const from = new FeedSource(source, newEventBatch(batchSize), inPlace ? m.tail : null);
        let t = -Infinity;
        for (;;) {
          const fed = feed(m, from, { time_us: t });
          if (fed.stop === "end") break;
          t = from.waiting ? from.nextTime + 2_000 : Infinity;
        }
        r.close();
        return { m, read };
      };
      const { m, read } = fedBy(true);
      const tail = m.tail!;
      expect(tail.total).toBe(read.length);
      expect(tail.total).toBeGreaterThan(tail.capacity * 2);
      expect(tail.total - tail.first).toBeGreaterThan(tail.capacity / 2);
      for (let k = tail.first; k < tail.total; k++) {
        const s = tail.slot(k);
        const row = Object.fromEntries(TAIL_COLUMNS.map((c) => [c, tail[c][s]!]));
        if (JSON.stringify(row) !== JSON.stringify(read[k])) expect({ k, row }).toEqual({ k, row: read[k]! });
      }
      const copied = fedBy(false).m;
      expect(m.devices.map((d) => processProfile(m, { device: d.device }))).toEqual(copied.devices.map((d) => processProfile(copied, { device: d.device })));
    });
  }
});

describe("every committed snapshot: its view ends where its replay does", () => {
  for (const name of SNAPSHOTS) {
    test(name, async () => {
      const path = join(FIXTURES, name);
      const parsed = await readSnapshotFile(path);
      const rec = await openRecording(path);
      const replayed = createModel();
      let final: ReplayLine | undefined;
      for await (const l of replay(rec.source, { ranges: rec.ranges, stacks: rec.stacks, model: replayed })) final = l;
      // `view FILE --json` and `replay FILE --json`: the trace's own end.
      expect(finalLine(snapshotModel(parsed).model)).toEqual(final as ReturnType<typeof finalLine>);
      // `view FILE` and `replay FILE --snapshot`: then the snapshot's segments taken in.
      const again = await openRecording(path);
      const viewed = snapshotModel(parsed, { keepTrace: true, resync: true }).model;
      const written = replayToEnd(again.source, { ranges: again.ranges, stacks: again.stacks, segments: again.segments, model: createModel().keepTrace() });
      expect(document(viewed)).toEqual(document(written));
    });
  }
});

describe("feed", () => {
  const header: RingHeader = {
    abi_version: 1, capacity: 1024, pid: 1, mode: "hook", n_devices: 1, attach_unix_us: 0, updated_unix_us: 0,
    current_step: 0, current_range: 0, current_line: 0, current_phase: 0, closed: true, write_index: 0, totals: [],
  };

  test("every column of a batch source reaches the model: records stamped with a line make its rows", () => {
    const tr = new Trace().alloc(0x100000, 4 * MiB).alloc(0x500000, 2 * MiB).free(0x100000, 4 * MiB);
    const b = tr.batch();
    b.line.fill(7, 0, 1);
    b.line.fill(9, 1, b.count);
    const m = createModel();
    m.setLines({ "7": "train.py:42: x = layer(x)", "9": "train.py:43: y = x * 2" });
    expect(feed(m, new FeedSource(batchSource(header, [b]))).stop).toBe("end");
    const rows = m.lines.rows(m.lineNames).sort((x, y) => x.line - y.line);
    expect(rows.map((r) => [r.location, r.alloc_bytes, r.freed_bytes])).toEqual([
      ["train.py:42", 4 * MiB, 0],
      ["train.py:43", 2 * MiB, 4 * MiB],
    ]);
  });

  test("stops at a recorded moment with the record after it kept, at a stream position, and after a number of records", () => {
    const tr = new Trace();
    tr.dt = 1000;
    for (let i = 0; i < 10; i++) tr.alloc(0x100000 * (i + 1), MiB);
    const from = new FeedSource(batchSource(header, [tr.batch()]), 4);
    const m = createModel();
    const t0 = tr.batch().time_us[0]!;
    expect(feed(m, from, { time_us: t0 + 2500 })).toEqual({ records: 3, lost: 0, stop: "time" });
    expect(from.nextTime).toBe(t0 + 3000);
    // What waits is fed first; reads then stop at the position asked for.
    expect(feed(m, from, { position: 8 })).toEqual({ records: 5, lost: 0, stop: "position" });
    expect(feed(m, from, { records: 1 })).toEqual({ records: 2, lost: 0, stop: "records" });
    expect(feed(m, from)).toEqual({ records: 0, lost: 0, stop: "end" });
    expect(m.eventsIngested).toBe(10);
  });
});
