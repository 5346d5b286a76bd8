// A large snapshot whose every trace entry carries frames, made of a real one: the last step of
// test/fixtures/snapshots/stacks-python (a transformers GPT-2 and AdamW on an H100, a step that
// allocates and frees as much as it holds) repeated step after step, at the same addresses as a
// training loop reuses them, its annotations with it. Entries that torch recorded without frames
// (autograd's thread runs no Python) take the frames the stacks="all" recording of the same run
// has for the same entry (its C++ frames), so that every entry has some. The final segments are
// the fixture's: the replay ends on them exactly, as it does on the fixture.
//
// Written as Python's pickler writes what torch.cuda.memory._dump_snapshot hands it (protocol 4,
// 64 KiB FRAMEs, every dict, list and new string memoized, shared frame dicts and repeated keys
// read back with BINGET, a fresh frames list per context and step, free_requested and
// free_completed of a block sharing one as torch's do). With --fresh-frames every frames list has
// dicts of its own (its strings still shared), as some writers lay frames out: the reader must not
// keep a dict per frame per entry.
//   bun tools/snapshot-frames-gen.ts OUT.pickle [ENTRIES] [--fresh-frames]   (default 1,500,000)
import { closeSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { unpickle, type PickleValue } from "../src/snapshot/pickle";

const FIXTURES = join(import.meta.dir, "..", "test", "fixtures", "snapshots");
const OP = { PROTO: 0x80, FRAME: 0x95, STOP: 0x2e, MARK: 0x28, EMPTY_DICT: 0x7d, EMPTY_LIST: 0x5d, SETITEMS: 0x75, APPENDS: 0x65, APPEND: 0x61, MEMOIZE: 0x94, BINGET: 0x68, LONG_BINGET: 0x6a, BININT: 0x4a, BININT1: 0x4b, BININT2: 0x4d, LONG1: 0x8a, SHORT_BINUNICODE: 0x8c, BINUNICODE: 0x58, NEWTRUE: 0x88, NEWFALSE: 0x89, NONE: 0x4e, TUPLE2: 0x86, BINFLOAT: 0x47 };
const FRAME_TARGET = 64 * 1024;

type Obj = { [k: string]: PickleValue };

/** Python's pickler, as far as a snapshot needs it: memo by identity, strings by value. */
class Pickler {
  private frame = new Uint8Array(4 * FRAME_TARGET);
  private n = 0;
  private memo = 0;
  /** Strings Python shares (keys, frame strings): written once, read back after. */
  private readonly strings = new Map<string, number>();
  /** Objects written once and named again (frame dicts, a frames list shared by two entries). */
  readonly objects = new Map<object, number>();
  written = 0;
  constructor(private readonly fd: number) {}
  private room(k: number) {
    if (this.n + k > this.frame.length) {
      const b = new Uint8Array((this.n + k) * 2);
      b.set(this.frame.subarray(0, this.n));
      this.frame = b;
    }
  }
  op(b: number) {
    this.room(1);
    this.frame[this.n++] = b;
  }
  private le(v: number, bytes: number) {
    this.room(bytes);
    for (let i = 0; i < bytes; i++) (this.frame[this.n++] = v % 256), (v = Math.floor(v / 256));
  }
  memoize(): number {
    this.op(OP.MEMOIZE);
    return this.memo++;
  }
  get(i: number) {
    if (i < 256) this.op(OP.BINGET), this.le(i, 1);
    else this.op(OP.LONG_BINGET), this.le(i, 4);
  }
  int(v: number) {
    if (!Number.isInteger(v)) {
      this.op(OP.BINFLOAT);
      const d = new DataView(new ArrayBuffer(8));
      d.setFloat64(0, v, false);
      for (let i = 0; i < 8; i++) this.op(d.getUint8(i));
    } else if (v >= 0 && v < 256) this.op(OP.BININT1), this.le(v, 1);
    else if (v >= 0 && v < 65536) this.op(OP.BININT2), this.le(v, 2);
    else if (v >= 0 && v < 2 ** 31) this.op(OP.BININT), this.le(v, 4);
    else {
      let k = 1;
      while (v >= 2 ** (8 * k - 1)) k++;
      this.op(OP.LONG1);
      this.le(k, 1);
      this.le(v, k);
    }
  }
  /** A string object of its own (as each of torch's fresh strings is), memoized. */
  newStr(s: string): number {
    const b = Buffer.from(s, "utf8");
    if (b.length < 256) this.op(OP.SHORT_BINUNICODE), this.le(b.length, 1);
    else this.op(OP.BINUNICODE), this.le(b.length, 4);
    this.room(b.length);
    this.frame.set(b, this.n);
    this.n += b.length;
    return this.memoize();
  }
  str(s: string) {
    const at = this.strings.get(s);
    if (at !== undefined) return this.get(at);
    this.strings.set(s, this.newStr(s));
  }
  /** Any plain value; `fresh`: lists and dicts written anew even where written before. */
  value(v: PickleValue, key = ""): void {
    if (v === null) return this.op(OP.NONE);
    if (typeof v === "boolean") return this.op(v ? OP.NEWTRUE : OP.NEWFALSE);
    if (typeof v === "number") return this.int(v);
    if (typeof v === "string") return this.str(v);
    if (v instanceof Uint8Array) throw new Error("no bytes in a snapshot");
    const seen = this.objects.get(v);
    if (seen !== undefined) return this.get(seen);
    if (Array.isArray(v)) {
      if (key === "segment_pool_id") return (this.int(v[0] as number), this.int(v[1] as number), this.op(OP.TUPLE2), void this.memoize());
      this.op(OP.EMPTY_LIST);
      this.objects.set(v, this.memoize());
      this.items(v);
      return;
    }
    this.op(OP.EMPTY_DICT);
    this.objects.set(v, this.memoize());
    const keys = Object.keys(v);
    if (keys.length === 0) return;
    this.op(OP.MARK);
    for (const k of keys) (this.str(k), this.value(v[k]!, k));
    this.op(OP.SETITEMS);
  }
  /** A list's items; `fresh`: dicts among them written anew, not read back from the memo. */
  items(v: PickleValue[], fresh = false) {
    const one = (x: PickleValue) => (fresh && x !== null && typeof x === "object" && !Array.isArray(x) ? this.freshDict(x as Obj) : this.value(x));
    if (v.length === 1) return (one(v[0]!), this.op(OP.APPEND));
    for (let i = 0; i < v.length; i += 1000) {
      this.op(OP.MARK);
      for (const x of v.slice(i, i + 1000)) one(x);
      this.op(OP.APPENDS);
    }
  }
  private freshDict(d: Obj) {
    this.op(OP.EMPTY_DICT);
    this.memoize();
    this.op(OP.MARK);
    for (const k of Object.keys(d)) (this.str(k), this.value(d[k]!, k));
    this.op(OP.SETITEMS);
  }
  /** Python's framer: a frame is written once it passes 64 KiB. */
  endOfItem(force = false) {
    if (this.n < FRAME_TARGET && !force) return;
    const head = new Uint8Array(9);
    head[0] = OP.FRAME;
    let v = this.n;
    for (let i = 1; i < 9; i++) (head[i] = v % 256), (v = Math.floor(v / 256));
    writeSync(this.fd, head);
    writeSync(this.fd, this.frame.subarray(0, this.n));
    this.written += 9 + this.n;
    this.n = 0;
  }
}

const fixture = (name: string) => unpickle(gunzipSync(require("node:fs").readFileSync(join(FIXTURES, `${name}.pickle.gz`)))) as Obj;

export interface FramesSnapshot {
  bytes: number;
  entries: number;
  steps: number;
  annotations: number;
}

/** Write a snapshot of about `entries` trace entries, every one with frames, to `path`. */
export function writeFramesSnapshot(path: string, entries: number, freshFrames = false): FramesSnapshot {
  const py = fixture("stacks-python");
  const all = fixture("stacks-all");
  const trace = (py.device_traces as PickleValue[])[0] as Obj[];
  const traceAll = (all.device_traces as PickleValue[])[0] as Obj[];
  const anns = py.external_annotations as Obj[];
  // The last step: from the last `data` range on, the dump's own `snapshot` entry left out.
  const start = anns.filter((a) => a.name === "data" && a.stage === "START").at(-1)!.time_us as number;
  const first = trace.findIndex((e) => (e.time_us as number) >= start);
  const step = trace.slice(first).filter((e) => e.action !== "snapshot");
  const stepAll = traceAll.slice(first, first + step.length);
  const stepAnns = anns.filter((a) => (a.time_us as number) >= start);
  const t0 = Math.min(step[0]!.time_us as number, stepAnns[0]!.time_us as number);
  const period = (step.at(-1)!.time_us as number) - t0 + 1000;
  // Each entry's frames: its own, else those of the stacks="all" run's same entry.
  const frames = step.map((e, k) => {
    const own = e.frames as PickleValue[] | undefined;
    if (own && own.length) return own;
    const other = stepAll[k]!;
    if (other.action !== e.action || other.size !== e.size) throw new Error(`stacks-all's entry ${first + k} is not stacks-python's`);
    return (other.frames as PickleValue[] | undefined) ?? [];
  });

  const fd = openSync(path, "w");
  writeSync(fd, new Uint8Array([OP.PROTO, 4]));
  const p = new Pickler(fd);
  p.written = 2;
  p.op(OP.EMPTY_DICT);
  p.memoize();
  p.op(OP.MARK);
  p.str("segments");
  p.value(py.segments!);
  p.endOfItem();
  p.str("device_traces");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  p.op(OP.EMPTY_LIST);
  p.memoize();
  const steps = Math.max(1, Math.round(entries / step.length));
  let inBatch = 0;
  const annsOut: Obj[] = [];
  for (let s = 0; s < steps; s++) {
    const shift = s * period - (steps - 1) * period; // the last step keeps the fixture's times
    // A fresh list per context and step; a block's two frees share theirs, as torch's do.
    const lists = new Map<PickleValue[], number>();
    for (let k = 0; k < step.length; k++) {
      const e = step[k]!;
      if (inBatch === 0) p.op(OP.MARK);
      p.op(OP.EMPTY_DICT);
      p.memoize();
      p.op(OP.MARK);
      for (const key of ["action", "addr", "size", "stream", "time_us"]) (p.str(key), p.value(key === "time_us" ? (e.time_us as number) + shift : e[key]!));
      p.str("compile_context");
      p.newStr("N/A");
      p.str("user_metadata");
      p.newStr("");
      p.str("frames");
      const own = (e.frames as PickleValue[] | undefined) ?? frames[k]!;
      const at = lists.get(own);
      if (at !== undefined) p.get(at);
      else {
        p.op(OP.EMPTY_LIST);
        lists.set(own, p.memoize());
        if (frames[k]!.length) p.items(frames[k]!, freshFrames);
      }
      p.op(OP.SETITEMS);
      if (++inBatch === 1000) (p.op(OP.APPENDS), (inBatch = 0));
      p.endOfItem();
    }
    for (const a of stepAnns) annsOut.push({ ...a, time_us: (a.time_us as number) + shift });
  }
  if (inBatch > 0) p.op(OP.APPENDS);
  p.op(OP.APPEND);
  p.str("allocator_settings");
  p.value(py.allocator_settings ?? {});
  p.str("external_annotations");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  for (let i = 0; i < annsOut.length; i += 1000) {
    p.op(OP.MARK);
    for (const a of annsOut.slice(i, i + 1000)) (p.value(a), p.endOfItem());
    p.op(OP.APPENDS);
  }
  p.op(OP.SETITEMS);
  p.op(OP.STOP);
  p.endOfItem(true);
  closeSync(fd);
  return { bytes: p.written, entries: steps * step.length, steps, annotations: annsOut.length };
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: bun tools/snapshot-frames-gen.ts OUT.pickle [ENTRIES] [--fresh-frames]");
  const n = process.argv.slice(3).find((a) => /^\d+$/.test(a));
  console.log(JSON.stringify(writeFramesSnapshot(out, Number(n ?? 1_500_000), process.argv.includes("--fresh-frames"))));
}
