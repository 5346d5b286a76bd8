// Frames kept once: each distinct frame and stack of a snapshot's trace interned, an entry carrying
// only its stack's id. Against the real snapshots' own frames (the same file read as a plain tree,
// nothing taken), and on a large trace made of a real step repeated, written as torch writes it
// (frame dicts shared) and with a dict per frame per entry: the same stacks either way, and the
// reader keeps no dict per frame per entry.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { pickleMachine, unpickle } from "../../src/snapshot/pickle";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { TraceColumns } from "../../src/snapshot/trace-columns";
import { viewJson } from "../../src/snapshot/view";
import { writeFramesSnapshot } from "../../tools/snapshot-frames-gen";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const WORK = mkdtempSync(join(tmpdir(), "stacks-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

type Raw = { filename: string; line: number; name: string };
const asFrames = (fs: Raw[] | undefined) => (fs ?? []).map((f) => ({ file: f.filename, line: f.line, name: f.name }));

describe("a snapshot's stacks, kept once", () => {
  for (const name of ["midrun", "stacks-python", "stacks-all", "no-zero-grad", "oom", "leak"]) {
    test(`${name}: every entry's stack is its own frames, each distinct stack once`, () => {
      const bytes = readFileSync(join(DIR, `${name}.pickle.gz`));
      const tree = unpickle(gunzipSync(bytes)) as { device_traces: { frames?: Raw[] }[][] };
      const { trace } = parseSnapshotBytes(bytes);
      const raw = tree.device_traces[0]!;
      expect(trace.count).toBe(raw.length);
      const distinct = new Set<string>();
      for (let i = 0; i < raw.length; i++) {
        const frames = asFrames(raw[i]!.frames);
        if (frames.length) distinct.add(JSON.stringify(frames));
        expect(trace.stacks.frames(trace.stack[i]!)).toEqual(frames);
        expect(trace.stack[i] === 0).toBe(frames.length === 0);
      }
      // ids 1.. are the distinct stacks, 0 the empty one
      expect(trace.stacks.stacks - 1).toBe(distinct.size);
    });
  }
});

describe("a long trace with frames on every entry", () => {
  const shared = join(WORK, "shared.pickle");
  const fresh = join(WORK, "fresh.pickle");
  const a = writeFramesSnapshot(shared, 20_000);
  const b = writeFramesSnapshot(fresh, 20_000, true);

  test("written as torch shares its frame dicts, or with a dict per frame per entry: the same stacks", () => {
    expect(b.entries).toBe(a.entries);
    const ta = parseSnapshotBytes(readFileSync(shared)).trace;
    const tb = parseSnapshotBytes(readFileSync(fresh)).trace;
    expect(tb.count).toBe(ta.count);
    for (let i = 0; i < ta.count; i += 7) expect(tb.stacks.frames(tb.stack[i]!)).toEqual(ta.stacks.frames(ta.stack[i]!));
    expect(tb.stacks.stacks).toBe(ta.stacks.stacks);
    // every entry has frames (those torch recorded without take stacks="all"'s)
    for (let i = 0; i < ta.count; i++) expect(ta.stack[i]).not.toBe(0);
  });

  test("the reader keeps no frame dict of an entry: a million objects are room enough for 20,000 entries and their 150,000 frame dicts", () => {
    const bytes = readFileSync(fresh);
    const tree = unpickle(bytes, { maxObjects: 50_000_000, maxStack: 10_000_000 }) as { device_traces: { frames: object[] }[][] };
    const dicts = new Set(tree.device_traces[0]!.flatMap((e) => e.frames));
    expect(dicts.size).toBeGreaterThan(150_000);
    // As a plain tree they are all there: past the limit
    expect(() => unpickle(bytes, { maxObjects: 1_000_000, maxStack: 10_000_000 })).toThrow(/more than 1000000 objects/);
    const trace = new TraceColumns();
    const root = pickleMachine({ maxObjects: 1_000_000, maxStack: 10_000_000 }, trace).feed(bytes, true);
    expect(root).toBeDefined();
    expect(trace.count).toBe(b.entries);
  });

  test("the step repeated ends where the recorded one ended: torch's own figures", async () => {
    const facts = await Bun.file(join(DIR, "stacks-python.facts.json")).json();
    const v = await viewJson(fresh);
    expect(v.replay.devices[0]!.allocated_bytes).toBe(facts.memory_allocated);
    expect(v.replay.devices[0]!.reserved_bytes).toBe(facts.memory_reserved);
    expect(v.trace!.entries).toBe(b.entries);
  });
});
