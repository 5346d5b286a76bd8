// Reading PyTorch memory snapshots: a real one recorded on an H100 (test/fixtures/normal-history.pickle,
// with what torch reported in normal-history.facts.json), checked against Python's own pickle;
// then truncated, fuzzed and hostile files, which must end in a SnapshotError and nothing else.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SnapshotError, unpickle } from "../../src/snapshot/pickle";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { annotationRanges, summarize } from "../../src/snapshot/summary";
import { snapshotModel } from "../../src/snapshot/view";

const FIX = join(import.meta.dir, "..", "fixtures");
const PICKLE = join(FIX, "normal-history.pickle");
const data = new Uint8Array(readFileSync(PICKLE));
const facts = JSON.parse(readFileSync(join(FIX, "normal-history.facts.json"), "utf8"));
const dir = mkdtempSync(join(tmpdir(), "gpumem-snap-"));
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");

function python(code: string, input?: Uint8Array): string {
  const p = Bun.spawnSync(["python3", "-c", code], { stdin: input ? Buffer.from(input) : undefined, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return p.stdout.toString();
}

describe("a snapshot recorded on an H100", () => {
  test("parses to exactly what Python's pickle module reads", () => {
    const ours = unpickle(data);
    const theirs = JSON.parse(python("import sys, pickle, json; print(json.dumps(pickle.load(sys.stdin.buffer)))", data));
    expect(ours).toEqual(theirs);
  });

  test("its summary: torch's allocated and reserved, segments, trace counts, annotations, top allocations with frames", () => {
    const s = summarize(parseSnapshotBytes(data));
    expect(s.devices[0]!.allocated_bytes).toBe(facts.memory_allocated);
    expect(s.devices[0]!.reserved_bytes).toBe(facts.memory_reserved);
    const py = JSON.parse(python("import sys,pickle,json,collections; d=pickle.load(sys.stdin.buffer); print(json.dumps({'segments':len(d['segments']),'by':collections.Counter(e['action'] for t in d['device_traces'] for e in t),'ann':len(d['external_annotations'])}))", data));
    expect(s.devices[0]!.segments).toBe(py.segments);
    expect(s.trace!.by_action).toEqual(py.by);
    expect(s.annotations.count).toBe(py.ann);
    expect(s.annotations.names).toContain("train_step");
    expect(s.top_allocations[0]!.size_bytes).toBeGreaterThanOrEqual(s.top_allocations[1]!.size_bytes);
    expect(s.top_allocations.some((a) => a.frames.some((f) => /\.py:\d+ /.test(f)))).toBe(true);
  });

  test("segments with their blocks, fragmentation and record_function ranges agree with Python reading the same file", () => {
    const s = summarize(parseSnapshotBytes(data));
    const py = JSON.parse(python(`
import sys, pickle, json
d = pickle.load(sys.stdin.buffer)
segs = sorted(d['segments'], key=lambda s: (s['device'], s['address']))
free = [b['size'] for s in segs for b in s['blocks'] if b['state'] == 'inactive']
opened, ranges = {}, []
for a in d['external_annotations']:
    k = (a['device'], a['name'])
    if a['stage'] == 'START':
        r = [a['device'], a['name'], a['time_us'], None]; ranges.append(r); opened.setdefault(k, []).append(r)
    elif opened.get(k):
        opened[k].pop()[3] = a['time_us']
ranges.sort(key=lambda r: r[2])
print(json.dumps({
  'segs': [[s['address'], s['total_size'], s['allocated_size'], s['active_size'], s['segment_type'],
            [[b['address'], b['size'], b['state']] for b in s['blocks']]] for s in segs],
  'frag': (1 - max(free) / sum(free)) if free else 0,
  'ranges': ranges}))`, data));
    expect(s.segments.map((g) => [g.address, g.total_bytes, g.allocated_bytes, g.active_bytes, g.segment_type, g.blocks.map((b) => [b.address, b.size_bytes, b.state])])).toEqual(py.segs);
    expect(s.devices[0]!.fragmentation).toBeCloseTo(py.frag, 12);
    expect(s.annotations.ranges.map((r) => [r.device, r.name, r.start_us, r.end_us])).toEqual(py.ranges);
    expect(s.annotations.ranges.filter((r) => r.name === "train_step").length).toBe(facts.steps);
  });

  test("record_function marks nest by name; a range still open at the snapshot has no end; a lone END is dropped", () => {
    const m = (stage: string, name: string, time_us: number) => ({ stage, name, device: 0, time_us });
    const r = annotationRanges([m("END", "x", 1), m("START", "f", 2), m("START", "f", 3), m("END", "f", 4), m("END", "f", 5), m("START", "g", 6)]);
    expect(r.map((x) => [x.name, x.start_us, x.end_us])).toEqual([["f", 2, 5], ["f", 3, 4], ["g", 6, null]]);
  });

  test("an OOM in the trace is reported with the bytes asked for and the bytes the device had free", () => {
    // The H100 snapshot with one OOM entry added at its end, in the allocator's trace format
    // (action 'oom', size = bytes requested, device_free = bytes cudaMemGetInfo reported free).
    const withOom = new Uint8Array(Buffer.from(python(`
import sys, pickle
d = pickle.load(sys.stdin.buffer)
t = d['device_traces'][0]
t.append({'action': 'oom', 'size': 1 << 47, 'device_free': 123456789, 'stream': 0, 'time_us': t[-1]['time_us'] + 1, 'frames': []})
sys.stdout.write(pickle.dumps(d, protocol=2).hex())`, data), "hex"));
    const s = summarize(parseSnapshotBytes(withOom));
    const last = (unpickle(data) as { device_traces: { time_us: number }[][] }).device_traces[0]!.at(-1)!.time_us;
    expect(s.oom).toEqual([{ device: 0, requested_bytes: 2 ** 47, free_bytes: 123456789, time_us: last + 1 }]);
    expect(s.trace!.by_action.oom).toBe(1);
    expect(summarize(parseSnapshotBytes(data)).oom).toEqual([]);
  });

  test("gzip-compressed, it reads the same; zstd is named", () => {
    expect(summarize(parseSnapshotBytes(Bun.gzipSync(data)))).toEqual(summarize(parseSnapshotBytes(data)));
    expect(() => parseSnapshotBytes(new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 0]))).toThrow(/zstd-compressed file: decompress it first/);
  });

  test("`gpumem-tui view FILE --json` prints the summary; a file that is no snapshot gets status 1 and words", () => {
    const ok = Bun.spawnSync(["bun", CLI, "view", PICKLE, "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(ok.exitCode).toBe(0);
    expect(JSON.parse(ok.stdout.toString()).devices[0].allocated_bytes).toBe(facts.memory_allocated);
    const bad = Bun.spawnSync(["bun", CLI, "view", join(FIX, "normal.json"), "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString()).toContain("not a PyTorch memory snapshot: not a pickle");
  });

  test("`gpumem-tui replay` plays a snapshot's trace through the model", () => {
    const p = Bun.spawnSync(["bun", CLI, "replay", PICKLE, "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const final = JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!);
    expect(final.type).toBe("final");
    expect(final.summary.devices[0].allocated_bytes).toBe(facts.memory_allocated);
  });
});

describe("bad and hostile files", () => {
  test("every truncation is a SnapshotError that says where", () => {
    for (let k = 1; k < 60; k++) {
      const cut = data.subarray(0, Math.floor((data.length * k) / 60));
      expect(() => unpickle(cut)).toThrow(SnapshotError);
    }
    expect(() => unpickle(data.subarray(0, 1000))).toThrow(/truncated|at byte \d+ of 1000/);
  });

  test("a pickle that asks to run code is refused, and the code does not run", () => {
    const marker = join(dir, "ran");
    // What `pickle.loads` would turn into os.system("touch …"): made by Python, passed as hex.
    const raw = Buffer.from(python(`import pickle, os, sys; print(pickle.dumps(type('E', (), {'__reduce__': lambda s: (os.system, ('touch ${marker}',))})(), protocol=4).hex())`).trim(), "hex");
    expect(() => unpickle(raw)).toThrow(/asks to run code \((STACK_GLOBAL|GLOBAL)\): refused/);
    expect(existsSync(marker)).toBe(false);
  });

  test("huge declared lengths, deep nesting and memo tricks end quickly in an error", () => {
    const huge = new Uint8Array([0x80, 0x04, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00]);
    expect(() => unpickle(huge)).toThrow(/length past any real file|truncated/);
    const deep = new Uint8Array(2 + 200_000 + 1);
    deep.set([0x80, 0x04]);
    deep.fill(0x5d, 2, 2 + 200_000); // 200,000 empty lists, never closed
    deep[deep.length - 1] = 0x2e;
    expect(() => unpickle(deep)).toThrow(/items left on the stack/);
    expect(() => unpickle(new Uint8Array([0x80, 0x04, 0x68, 0x07, 0x2e]))).toThrow(/memo 7 read before it was written/);
    expect(() => unpickle(new Uint8Array([0x80, 0x04, 0x5d, 0x8c, 0x01, 0x61, 0x8c, 0x01, 0x62, 0x73, 0x2e]))).toThrow(/SETITEM\(S\) on something that is not a dict/);
    expect(() => summarize(parseSnapshotBytes(new Uint8Array([0x80, 0x04, 0x5d, 0x2e])))).toThrow(/no `segments` list/);
  });

  test("1 s of random byte flips: a value or a SnapshotError, never anything else", () => {
    let seed = 12345;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const deadline = performance.now() + 1000;
    let errors = 0;
    let parsed = 0;
    while (performance.now() < deadline) {
      const buf = data.slice();
      for (let i = 0; i < 4; i++) buf[Math.floor(rand() * buf.length)] = Math.floor(rand() * 256);
      try {
        const v = parseSnapshotBytes(buf);
        parsed++;
        try {
          summarize(v);
          snapshotModel(v);
        } catch (e) {
          expect(e).toBeInstanceOf(SnapshotError);
        }
      } catch (e) {
        if (!(e instanceof SnapshotError)) throw new Error(`seed ${seed}: ${e}`);
        errors++;
      }
    }
    expect(errors + parsed).toBeGreaterThan(10);
  });
});

describe("files that are something else", () => {
  const cli = (...args: string[]) => {
    const p = Bun.spawnSync(["bun", CLI, ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
  };
  test.each([
    ["view DIRECTORY", ["view", dir, "--json"], `${dir} is a directory, not a snapshot file`],
    ["replay DIRECTORY", ["replay", dir, "--json"], `${dir} is a directory, not a recording`],
    ["view RING", ["view", join(FIX, "normal.ring"), "--json"], `${join(FIX, "normal.ring")} is a gpumem-tui ring recording, not a snapshot: \`gpumem-tui replay ${join(FIX, "normal.ring")}\` plays it`],
    ["replay JSON", ["replay", join(FIX, "normal.facts.json"), "--json"], `${join(FIX, "normal.facts.json")} is neither a gpumem-tui ring recording nor a PyTorch memory snapshot`],
  ] as const)("%s: status 1, one line that names the file and what it is", (_what, args, message) => {
    const { code, out, err } = cli(...args);
    expect(code).toBe(1);
    expect(out).toBe("");
    expect(err).toStartWith(`gpumem-tui: ${message}`);
    expect(err.trim().split("\n")).toHaveLength(1);
  });
});
