// A streaming pickle writer for the snapshot generators (snapshot-gen.ts, snapshot-frames-gen.ts):
// Python's pickler as far as a memory snapshot needs it, writing what it writes byte for byte.
// Protocol 4: 64 KiB FRAMEs written to the file as they fill, every dict, list and new string
// memoized, shared strings and objects read back with BINGET. The generated files run to hundreds
// of MB, so a frame is written out and its buffer reused; the file is never in memory whole.
//
// Not src/snapshot/pickle-write.ts: that writes the product's exports for memory_viz (protocol 2,
// no memo, no frames, the whole document built in memory), a different layout from torch's.
import { closeSync, openSync, writeSync } from "node:fs";
import type { PickleValue } from "../src/snapshot/pickle";

export const OP = { PROTO: 0x80, FRAME: 0x95, STOP: 0x2e, MARK: 0x28, EMPTY_DICT: 0x7d, EMPTY_LIST: 0x5d, SETITEMS: 0x75, APPENDS: 0x65, APPEND: 0x61, MEMOIZE: 0x94, BINGET: 0x68, LONG_BINGET: 0x6a, BININT: 0x4a, BININT1: 0x4b, BININT2: 0x4d, LONG1: 0x8a, SHORT_BINUNICODE: 0x8c, BINUNICODE: 0x58, NEWTRUE: 0x88, NEWFALSE: 0x89, NONE: 0x4e, TUPLE2: 0x86, BINFLOAT: 0x47 };
const FRAME_TARGET = 64 * 1024;

type Obj = { [k: string]: PickleValue };

/** Python's pickler, as far as a snapshot needs it: memo by identity, strings by value. */
export class Pickler {
  private frame = new Uint8Array(4 * FRAME_TARGET);
  private n = 0;
  private memo = 0;
  /** Strings Python shares (keys, frame strings): written once, read back after. */
  private readonly strings = new Map<string, number>();
  /** Objects written once and named again (frame dicts, a frames list shared by two entries). */
  readonly objects = new Map<object, number>();
  /** Bytes written to the file so far (the caller adds what it wrote before the first frame). */
  written = 0;
  constructor(private readonly fd: number) {}

  /** A snapshot file begun as Python's pickler begins one: PROTO before the first FRAME, then the
   *  top-level dict, memoized, its items to follow a MARK (end them with endDict). */
  static beginDict(path: string): Pickler {
    const fd = openSync(path, "w");
    writeSync(fd, new Uint8Array([OP.PROTO, 4]));
    const p = new Pickler(fd);
    p.written = 2;
    p.op(OP.EMPTY_DICT);
    p.memoize();
    p.op(OP.MARK);
    return p;
  }
  /** The top-level dict's items set, STOP, the last frame written and the file closed. */
  endDict(): void {
    this.op(OP.SETITEMS);
    this.op(OP.STOP);
    this.endOfItem(true);
    closeSync(this.fd);
  }
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
  /** A number: an integer as Python writes an int, any other as a float (BINFLOAT). */
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
      // LONG1, as few bytes as keep the sign (non-negative here)
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
  /** An interned string: written once, read back from the memo after. */
  str(s: string) {
    const at = this.strings.get(s);
    if (at !== undefined) return this.get(at);
    this.strings.set(s, this.newStr(s));
  }
  /** Any plain value; lists and dicts written before are read back from the memo. */
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
