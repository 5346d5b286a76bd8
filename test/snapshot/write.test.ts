// Snapshots the monitor writes from its own events (`d` on a process that records no history, or
// on a replay). The bridge to the real thing: normal-history.ring and normal-history.pickle were
// recorded by the same H100 run, the ring by our hook and the pickle by torch's memory history.
// Written from the ring, our snapshot must hold torch's segments, blocks and trace; Python must
// load it; it must use only the pickle opcodes pytorch.org/memory_viz reads; and its trace must
// add up to its segments the way memory_viz walks it.
import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newEventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { createModel, replay } from "../../src/profiler";
import { checkTrace, snapshotFromModel, type WrittenSnapshot } from "../../src/snapshot/from-model";
import { pickle, Tuple, type PickleData } from "../../src/snapshot/pickle-write";
import { unpickle } from "../../src/snapshot/pickle";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { summarize } from "../../src/snapshot/summary";
import { freeDumpPath, writeModelSnapshot, writtenSentence } from "../../src/snapshot/write";
import { formatBytes } from "../../src/words";
import { TORCH_PYTHON_HINT, torchPython } from "../support/torch";

const FIX = join(import.meta.dir, "..", "fixtures");
const RINGS = join(import.meta.dir, "..", "profiler", "fixtures", "rings");
const dir = mkdtempSync(join(tmpdir(), "gpumem-write-"));
const python3 = Bun.which("python3");
const withPython = (name: string, fn: () => void) => (python3 ? test(name, fn) : test.skip(`${name} (needs python3)`, fn));

// The opcodes MemoryViz.js's unpickler handles (pytorch/torch/utils/viz/MemoryViz.js, `unpickle`);
// anything else makes pytorch.org/memory_viz throw "UNKNOWN OPCODE".
const MEMORY_VIZ_OPCODES = new Set([
  "APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1", "LONG_BINGET", "MARK", "MEMOIZE",
  "PROTO", "SETITEMS", "SHORT_BINUNICODE", "STOP", "TUPLE2", "APPEND", "NEWFALSE", "BINPUT", "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE",
  "NONE", "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE3", "LONG_BINPUT", "LIST", "DICT", "SETITEM",
]);

async function modelOf(dirName: string, name: string, traceEntries?: number) {
  const manifest = await Bun.file(join(dirName, `${name}.json`)).json();
  const r = openRing(join(dirName, `${name}.ring`));
  const model = createModel().keepTrace(traceEntries);
  try {
    for await (const _ of replay(r, { ranges: manifest.ranges, model })) {
    }
  } finally {
    r.close();
  }
  return model;
}

function python(code: string, input: Uint8Array): string {
  const p = Bun.spawnSync([python3!, "-c", code], { stdin: Buffer.from(input), stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return p.stdout.toString();
}

// biome-ignore lint: test data
type Any = any;
const torch: Any = unpickle(new Uint8Array(readFileSync(join(FIX, "normal-history.pickle"))));
const facts = JSON.parse(readFileSync(join(FIX, "normal-history.facts.json"), "utf8"));
const ours: WrittenSnapshot = snapshotFromModel(await modelOf(FIX, "normal-history"));
const bytes = pickle(ours as unknown as PickleData);

describe("a snapshot written from the monitor's events, beside torch's own of the same run", () => {
  test("the same segments and the same live blocks, address for address, with the sizes asked for", () => {
    const segs = (s: Any[]) => s.map((g) => `${g.device}:${g.address}:${g.total_size}`).sort();
    expect(segs(ours.segments)).toEqual(segs(torch.segments));
    const blocks = (s: Any[], withRequested: boolean) =>
      s.flatMap((g) => g.blocks.map((b: Any) => `${b.address}:${b.size}:${b.state}${withRequested && b.state !== "inactive" ? `:${b.requested_size}` : ""}`)).sort();
    expect(blocks(ours.segments, true)).toEqual(blocks(torch.segments, true));
    // Every segment is tiled by its blocks, as memory_viz assumes (it places each block after the last).
    for (const g of ours.segments) expect(g.blocks.reduce((x, b) => x + b.size, 0)).toBe(g.total_size);
    const allocated = ours.segments.reduce((x, g) => x + g.allocated_size, 0);
    expect(allocated).toBe(facts.memory_allocated);
    expect(ours.segments.reduce((x, g) => x + g.total_size, 0)).toBe(facts.memory_reserved);
  });

  test("torch's whole trace, entry for entry, at the end of ours (ours also holds what came before history was on)", () => {
    const key = (e: Any) => `${e.action}:${e.addr}:${e.size}`;
    const theirs: Any[] = torch.device_traces[0];
    const mine = ours.device_traces[0]!.filter((e) => e.action !== "snapshot"); // torch's dump marks itself in our ring
    expect(mine.length).toBeGreaterThan(theirs.length);
    const tail = mine.slice(mine.length - theirs.length);
    expect(tail.map(key)).toEqual(theirs.map(key));
    // Times agree within a millisecond (the ring's clock calibration against torch's).
    for (let i = 0; i < theirs.length; i++) expect(Math.abs(tail[i]!.time_us - theirs[i].time_us)).toBeLessThan(1000);
    expect(ours.external_annotations.map((a) => `${a.stage}:${a.name}`)).toEqual(torch.external_annotations.map((a: Any) => `${a.stage}:${a.name}`));
    expect(ours.gpumem.trace_dropped).toBe(0);
    expect(ours.gpumem.notes).toEqual([]);
  });

  test("blocks and allocations carry what the monitor knows in place of stack frames", () => {
    const frames = ours.segments.flatMap((g) => g.blocks.filter((b) => b.state === "active_allocated").map((b) => b.frames[0]!.name));
    expect(frames.every((f) => /^(.+ )?\((parameter|gradient|optimizer_state|buffer|activation|temporary|other)\) allocated step \d+ \w+/.test(f))).toBe(true);
    const allocs = ours.device_traces[0]!.filter((e) => e.action === "alloc");
    expect(allocs.some((e) => / in mlp_block$/.test(e.frames[0]!.name))).toBe(true);
  });

  test("gpumem-tui view reads it back to torch's totals", () => {
    const s = summarize(parseSnapshotBytes(bytes));
    expect(s.devices[0]!.allocated_bytes).toBe(facts.memory_allocated);
    expect(s.devices[0]!.reserved_bytes).toBe(facts.memory_reserved);
  });

  withPython("Python's pickle loads it, and it uses only opcodes pytorch.org/memory_viz reads", () => {
    const out = JSON.parse(
      python(
        `import sys, json, pickle, pickletools
data = sys.stdin.buffer.read()
s = pickle.loads(data)
ops = sorted({op.name for op, _, _ in pickletools.genops(data)})
print(json.dumps({"ops": ops, "segments": len(s["segments"]), "pool": list(s["segments"][0]["segment_pool_id"]), "pool_is_tuple": isinstance(s["segments"][0]["segment_pool_id"], tuple),
  "traces": [len(t) for t in s["device_traces"]], "first": {k: v for k, v in s["device_traces"][0][0].items() if k != "frames"}}))`,
        bytes,
      ),
    );
    for (const op of out.ops) expect(MEMORY_VIZ_OPCODES.has(op)).toBe(true);
    expect(out.segments).toBe(torch.segments.length);
    expect(out.pool_is_tuple).toBe(true);
    expect(out.traces).toEqual(ours.device_traces.map((t) => t.length));
    const e = ours.device_traces[0]![0]!;
    expect(out.first).toEqual({ action: e.action, addr: e.addr, size: e.size, stream: e.stream, time_us: e.time_us });
  });

  test("written to a file 0600 that gpumem-tui view opens", async () => {
    const model = await modelOf(FIX, "normal-history");
    const f = writeModelSnapshot(model, dir, 861, new Date(2026, 10, 26, 8, 30, 12));
    expect(f.path).toBe(join(dir, "861-snapshot-2026-11-26T08-30-12.pickle"));
    expect(statSync(f.path).mode & 0o777).toBe(0o600);
    const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "..", "src", "cli.ts"), "view", f.path, "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const v = JSON.parse(p.stdout.toString());
    expect(v.devices[0].allocated_bytes).toBe(facts.memory_allocated);
  });
});

describe("dump files and what d says of them", () => {
  test("named by the local time; a second dump in the same second, or a file already there, is never overwritten", async () => {
    const model = await modelOf(FIX, "normal-history");
    const at = new Date(2026, 0, 2, 3, 4, 5);
    const taken = join(dir, "7-snapshot-2026-01-02T03-04-05.pickle");
    writeFileSync(taken, "someone else's file");
    const a = writeModelSnapshot(model, dir, 7, at);
    const b = writeModelSnapshot(model, dir, 7, at);
    expect([a.path, b.path]).toEqual([join(dir, "7-snapshot-2026-01-02T03-04-05-2.pickle"), join(dir, "7-snapshot-2026-01-02T03-04-05-3.pickle")]);
    expect(readFileSync(taken, "utf8")).toBe("someone else's file");
    expect(readFileSync(a.path)).toEqual(readFileSync(b.path));
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    expect(freeDumpPath(dir, 7, at)).toBe(join(dir, "7-snapshot-2026-01-02T03-04-05-4.pickle"));
  });

  test("one sentence: the trace entries and the records they came from, the newest of more where the monitor kept fewer", async () => {
    const all = await modelOf(FIX, "normal-history");
    const whole = writeModelSnapshot(all, dir, 8);
    expect(whole.records).toBe(whole.records_seen);
    const line = writtenSentence(whole, "snapshot of pid 8").split("\n")[0]!;
    expect(line).toBe(`snapshot of pid 8: ${formatBytes(whole.size)}, ${whole.trace_entries} trace entries from ${whole.records} records`);
    // A trace of the last 1000 records of more: said once, in the same sentence, with both counts.
    const cut = writeModelSnapshot(await modelOf(FIX, "normal-history", 1000), dir, 9);
    expect(cut.records).toBe(1000);
    expect(cut.records_seen).toBe(whole.records_seen);
    const said = writtenSentence(cut, "snapshot of pid 9", "pid 9 has exited");
    expect(said.split("\n")[0]).toStartWith(`snapshot of pid 9: ${formatBytes(cut.size)}, ${cut.trace_entries} trace entries from the last 1000 of ${cut.records_seen} records (pid 9 has exited)`);
    expect(said).not.toContain("the trace holds");
    expect(said.split("\n")[1]).toBe(cut.path);
  });
});

describe("gpumem-tui replay FILE --snapshot OUT", () => {
  const cli = (...args: string[]) => Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "..", "src", "cli.ts"), ...args], { stdout: "pipe", stderr: "pipe" });
  test("a recorded ring becomes a snapshot with torch's segments; torch's own snapshot comes back as it was", () => {
    for (const input of ["normal-history.ring", "normal-history.pickle"]) {
      const out = join(dir, `${input}.out.pickle`);
      const p = cli("replay", join(FIX, input), "--snapshot", out);
      expect(p.stderr.toString()).toBe("");
      expect(p.exitCode).toBe(0);
      // A sentence as d says it, the path on its own line; the same facts as JSON with --json.
      const [line, path] = p.stdout.toString().split("\n");
      expect(line).toMatch(new RegExp(`^snapshot of ${join(FIX, input).replace(/[.]/g, "\\.")}: [\\d.]+ [KMG]?i?B, \\d+ trace entries from \\d+ records`));
      expect(path).toBe(out);
      const j = cli("replay", join(FIX, input), "--snapshot", out, "--json", "--force");
      expect(JSON.parse(j.stdout.toString())).toMatchObject({ path: out, size: statSync(out).size });
      const back = unpickle(new Uint8Array(readFileSync(out))) as Any;
      const key = (g: Any) => `${g.address}:${g.total_size}:${g.blocks.map((b: Any) => `${b.size}${b.state[0]}`).join(",")}`;
      expect(back.segments.map(key).sort()).toEqual(torch.segments.map(key).sort());
      expect(checkTrace(back.segments, back.device_traces[0])).toBe(0);
    }
  });

  test("a file already at OUT is kept, said in one line before the replay; --force replaces a regular file only", () => {
    const ring = join(FIX, "normal.ring");
    const out = join(dir, "taken.pickle");
    writeFileSync(out, "the user's own file\n");
    const p = cli("replay", ring, "--snapshot", out);
    expect(p.exitCode).toBe(1);
    expect(p.stderr.toString()).toBe(`gpumem-tui: cannot write the snapshot to ${out}: a file of that name is already there (--force replaces it)\n`);
    expect(p.stdout.toString()).toBe("");
    expect(readFileSync(out, "utf8")).toBe("the user's own file\n");
    // A dangling link is a name taken too: never written through, never replaced unasked.
    const link = join(dir, "taken-link.pickle");
    symlinkSync(join(dir, "nowhere"), link);
    expect(cli("replay", ring, "--snapshot", link).stderr.toString()).toContain("a file of that name is already there");
    expect(existsSync(join(dir, "nowhere"))).toBe(false);

    const f = cli("replay", ring, "--snapshot", out, "--force");
    expect(f.stderr.toString()).toBe("");
    expect(f.exitCode).toBe(0);
    expect(unpickle(new Uint8Array(readFileSync(out)))).toHaveProperty("segments");
    expect(statSync(out).mode & 0o777).toBe(0o600);
    // --force replaces a file, not what a link points to, nor a directory.
    const victim = join(dir, "victim");
    writeFileSync(victim, "the victim's own words\n");
    const toVictim = join(dir, "to-victim.pickle");
    symlinkSync(victim, toVictim);
    const l = cli("replay", ring, "--snapshot", toVictim, "--force");
    expect(l.exitCode).toBe(1);
    expect(l.stderr.toString()).toBe(`gpumem-tui: cannot write the snapshot to ${toVictim}: it is a symbolic link (never followed)\n`);
    expect(readFileSync(victim, "utf8")).toBe("the victim's own words\n");
    expect(lstatSync(toVictim).isSymbolicLink()).toBe(true);
    const sub = mkdtempSync(join(dir, "sub-"));
    expect(cli("replay", ring, "--snapshot", sub, "--force").stderr.toString()).toBe(`gpumem-tui: cannot write the snapshot to ${sub}: not a regular file (a directory)\n`);
    // Nothing left behind by the refusals: no temporary file beside them.
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  test("a gzip'd ring is named as given: x.ring.gz, not x.ring", () => {
    const ring = join(FIX, "compile-graphs.ring.gz");
    const out = join(dir, "from-gz.pickle");
    const p = cli("replay", ring, "--snapshot", out);
    expect(p.stderr.toString()).toBe("");
    expect(p.stdout.toString()).toStartWith(`snapshot of ${ring}: `);
  });

  test("bad uses say what is wrong and write nothing", () => {
    const p = cli("replay", join(FIX, "normal.ring"), "--snapshot", join(dir, "no", "such", "dir.pickle"));
    expect(p.exitCode).toBe(1);
    expect(p.stderr.toString()).toContain("cannot write the snapshot to");
    expect(p.stderr.toString()).toContain("its directory does not exist");
    expect(cli("replay", join(FIX, "normal.ring"), "--snapshot", "x", "--speed", "2").stderr.toString()).toContain("--snapshot replays to the end");
    expect(cli("--snapshot", "x").stderr.toString()).toContain("--snapshot goes with replay");
    expect(cli("replay", join(FIX, "normal.ring"), "--force").stderr.toString()).toContain("--force goes with replay --snapshot OUT");
  });
});

// PyTorch's own tools on the snapshots the monitor writes: torch.cuda._memory_viz is plain Python
// (no GPU needed), so any Python with torch runs this (test/support/torch.ts).
const torchPy = torchPython();
const withTorch = (name: string, fn: () => void) =>
  torchPy ? test(name, fn, 60_000) : test.skip(`${name} (${TORCH_PYTHON_HINT})`, fn);

describe("PyTorch's torch.cuda._memory_viz on snapshots the monitor wrote", () => {
  const rings = [join(FIX, "normal-history.ring"), join(FIX, "oom.ring"), join(RINGS, "lapped.ring"), join(RINGS, "expandable.ring"), join(RINGS, "names.ring")];
  withTorch("segsum (its own checks that blocks tile segments), trace, trace_plot and segment_plot take every one", () => {
    for (const ring of rings) {
      const out = join(dir, `${ring.split("/").pop()}.viz.pickle`);
      const w = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "..", "src", "cli.ts"), "replay", ring, "--snapshot", out], { stdout: "pipe", stderr: "pipe" });
      expect(w.stderr.toString()).toBe("");
      const py = Bun.spawnSync([torchPy!, "-c", `import pickle, json, sys
from torch.cuda import _memory_viz as v
d = pickle.load(open(sys.argv[1], "rb"))
seg = v.segsum(d)
print(json.dumps({"totals": [l for l in seg.splitlines() if l.startswith("total_")], "trace": len(v.trace(d).splitlines()), "html": len(v.trace_plot(d)), "segments_html": len(v.segment_plot(d))}))`, out], { stdout: "pipe", stderr: "pipe" });
      expect(py.exitCode).toBe(0);
      const r = JSON.parse(py.stdout.toString());
      const back = unpickle(new Uint8Array(readFileSync(out))) as Any;
      const reserved = back.segments.reduce((a: number, g: Any) => a + g.total_size, 0);
      expect(r.totals[0]).toBe(`total_reserved: ${(reserved / 2 ** 20).toFixed(1)}MiB`);
      expect(r.trace).toBeGreaterThan(back.device_traces[0].length);
      expect(r.html).toBeGreaterThan(10_000);
      expect(r.segments_html).toBeGreaterThan(10_000);
    }
  });
});

describe("a trace must add up to its segments (memory_viz draws any moment by walking back from them)", () => {
  test("torch's own snapshot adds up from its first entry, and so does ours", () => {
    expect(checkTrace(torch.segments, torch.device_traces[0])).toBe(0);
    expect(checkTrace(ours.segments, ours.device_traces[0]!)).toBe(0);
  });

  test("a free whose block is nowhere (its completion lost) cuts the trace after it", () => {
    const t: Any[] = [...torch.device_traces[0]];
    // The first free_completed whose block is allocated again later: drop it, leaving its
    // free_requested pointing at a block memory_viz would not find.
    const i = t.findIndex((e, k) => e.action === "free_completed" && t[k - 1]?.action === "free_requested");
    const cut = [...t.slice(0, i), ...t.slice(i + 1)];
    const start = checkTrace(torch.segments, cut);
    expect(start).toBeGreaterThan(0);
    expect(start).toBeLessThanOrEqual(i);
    expect(checkTrace(torch.segments, cut.slice(start))).toBe(0);
  });

  test("a lapped ring (its oldest records overwritten): blocks from before them get a home, the whole trace adds up, the file says so", async () => {
    const model = await modelOf(RINGS, "lapped");
    const s = snapshotFromModel(model);
    expect(s.gpumem.unplaced_blocks).toBeGreaterThan(0);
    expect(s.gpumem.notes.join(" ")).toMatch(/live blocks lie in segments allocated before the monitor's records begin/);
    expect(s.gpumem.trace_dropped).toBe(0);
    expect(s.gpumem.trace_entries).toBe(model.eventsIngested - s.external_annotations.length - markCount(model));
    for (const d of s.device_traces.keys()) expect(checkTrace(s.segments, s.device_traces[d]!)).toBe(0);
    // Every live block the model holds is in the file.
    const live = s.segments.flatMap((g) => g.blocks.filter((b) => b.state === "active_allocated"));
    expect(live.length).toBe(model.devices[0]!.blocks.count);
    const back = unpickle(pickle(s as unknown as PickleData)) as Any;
    expect(back.segments.length).toBe(s.segments.length);
  });

  test("expandable segments: mapped pages as segments, marked expandable, trace adds up", async () => {
    const model = await modelOf(RINGS, "expandable");
    const facts = JSON.parse(readFileSync(join(RINGS, "expandable.facts.json"), "utf8"));
    const s = snapshotFromModel(model);
    expect(s.segments.every((g) => g.is_expandable)).toBe(true);
    expect(s.segments.reduce((x, g) => x + g.total_size, 0)).toBe(facts.memory_reserved);
    for (const d of s.device_traces.keys()) expect(checkTrace(s.segments, s.device_traces[d]!)).toBe(0);
  });

  test("a model that kept no trace still gives segments and blocks, and says the trace is missing", async () => {
    const manifest = await Bun.file(join(FIX, "normal.json")).json();
    const r = openRing(join(FIX, "normal.ring"));
    const model = createModel();
    for await (const _ of replay(r, { ranges: manifest.ranges, model })) {
    }
    r.close();
    const s = snapshotFromModel(model);
    expect(s.device_traces.every((t) => t.length === 0)).toBe(true);
    expect(s.segments.length).toBeGreaterThan(0);
    expect(s.gpumem.notes[0]).toMatch(/kept no trace/);
  });
});

// Phase and step marks: records that are neither allocator events nor range marks.
function markCount(model: Awaited<ReturnType<typeof modelOf>>): number {
  const t = model.tail!;
  let n = 0;
  for (let k = t.first; k < t.total; k++) if (t.action[t.slot(k)] === 16 || t.action[t.slot(k)] === 17) n++;
  return n;
}

/** normal-history.ring's records in one batch, with its manifest, to be fed by hand. */
async function recordedBatch() {
  const manifest = await Bun.file(join(FIX, "normal-history.json")).json();
  const r = openRing(join(FIX, "normal-history.ring"));
  const batch = newEventBatch(1 << 16);
  r.read(batch);
  r.close();
  return { manifest, batch };
}

test("records lost mid-run: the trace restarts after the loss and the file says so", async () => {
  const { manifest, batch } = await recordedBatch();
  const model = createModel().keepTrace();
  model.setRanges(manifest.ranges);
  const cutAt = 700;
  model.ingest(batch, 0, 0, cutAt);
  model.ingest(batch, 25, cutAt + 25, batch.count); // 25 records lost here
  const s = snapshotFromModel(model);
  expect(s.gpumem.notes.join(" ")).toMatch(/records were lost/);
  expect(s.device_traces[0]!.length).toBeLessThanOrEqual(batch.count - cutAt - 25);
  for (const d of s.device_traces.keys()) expect(checkTrace(s.segments, s.device_traces[d]!)).toBe(0);
});

test("allocations made on a line the line profiler follows carry that line as their first frame", async () => {
  // The H100 run's records, with a line id stamped on every alloc of its second step's forward,
  // as the hook stamps the header's cur_line while a decorated line runs.
  const { manifest, batch } = await recordedBatch();
  let tagged = 0;
  for (let i = 0; i < batch.count; i++)
    if (batch.action[i] === 0 && batch.step[i] === 1 && batch.phase[i] === 1) (batch.line[i] = 7), tagged++;
  expect(tagged).toBeGreaterThan(10);
  const model = createModel().keepTrace();
  model.setRanges(manifest.ranges);
  model.setLines({ "7": "train.py:42: out = model(x)" });
  model.ingest(batch);
  const s = snapshotFromModel(model);
  const allocs = s.device_traces[0]!.filter((e) => e.action === "alloc");
  const onLine = allocs.filter((e) => e.frames[0]!.filename === "train.py");
  expect(onLine).toHaveLength(tagged);
  expect(onLine[0]!.frames[0]).toEqual({ filename: "train.py", line: 42, name: "out = model(x)" });
  expect(onLine[0]!.frames[1]!.name).toMatch(/^step 1 forward/);
  // Outside profiled code (line 0) an allocation has only the monitor's own frame.
  expect(allocs.filter((e) => e.frames.length === 1)).toHaveLength(allocs.length - tagged);
  expect(checkTrace(s.segments, s.device_traces[0]!)).toBe(0);
});

describe("the pickle writer", () => {
  test("what it writes, our reader and Python read back as written", () => {
    const v = { a: [0, 255, 256, 65535, 65536, -1, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 47 + 3, -(2 ** 40)], s: "héllo ✓", f: 1.5, t: true, n: null, e: [], d: {} };
    const b = pickle(v as PickleData);
    expect(unpickle(b)).toEqual(v);
    if (python3) expect(JSON.parse(python("import sys, json, pickle; print(json.dumps(pickle.loads(sys.stdin.buffer.read())))", b))).toEqual(v);
    expect(unpickle(pickle(new Tuple([1, "x"])))).toEqual([1, "x"]);
    // More than a batch of 1000 items or keys.
    const big = Array.from({ length: 2500 }, (_, i) => i);
    expect(unpickle(pickle(big))).toEqual(big);
  });
});
