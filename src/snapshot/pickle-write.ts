// Writing plain data as a pickle that Python's pickle.load and pytorch.org/memory_viz both read.
// memory_viz has its own small unpickler (MemoryViz.js): protocol 2 to 4 and a fixed set of
// opcodes. We write protocol 2 with only opcodes in that set, no memo (nothing is shared), and
// MARK … SETITEMS / APPENDS in batches of 1000 as Python's pickler does.

/** A tuple in the output (memory_viz and Python read `segment_pool_id` as a 2-tuple). */
export class Tuple {
  constructor(readonly items: PickleData[]) {}
}

export type PickleData = null | boolean | number | bigint | string | Tuple | PickleData[] | { [key: string]: PickleData };

/** Opcodes we write; each is one that memory_viz's unpickler reads (tested against this list). */
export const OP = {
  PROTO: 0x80,
  STOP: 0x2e,
  MARK: 0x28,
  EMPTY_DICT: 0x7d,
  SETITEMS: 0x75,
  EMPTY_LIST: 0x5d,
  APPENDS: 0x65,
  EMPTY_TUPLE: 0x29,
  TUPLE1: 0x85,
  TUPLE2: 0x86,
  TUPLE3: 0x87,
  TUPLE: 0x74,
  NONE: 0x4e,
  NEWTRUE: 0x88,
  NEWFALSE: 0x89,
  BININT: 0x4a,
  BININT1: 0x4b,
  BININT2: 0x4d,
  LONG1: 0x8a,
  BINFLOAT: 0x47,
  BINUNICODE: 0x58,
} as const;

const BATCH = 1000;

class Out {
  buf = new Uint8Array(1 << 16);
  n = 0;
  private readonly enc = new TextEncoder();
  private readonly dv8 = new DataView(new ArrayBuffer(8));

  room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.n + k) cap *= 2;
    const b = new Uint8Array(cap);
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
  }
  byte(b: number): void {
    this.room(1);
    this.buf[this.n++] = b;
  }
  u32(v: number): void {
    this.room(4);
    this.buf[this.n++] = v & 0xff;
    this.buf[this.n++] = (v >>> 8) & 0xff;
    this.buf[this.n++] = (v >>> 16) & 0xff;
    this.buf[this.n++] = (v >>> 24) & 0xff;
  }
  str(s: string): void {
    // UTF-8 is at most 3 bytes per UTF-16 unit.
    this.room(5 + s.length * 3);
    this.buf[this.n++] = OP.BINUNICODE;
    const at = this.n;
    this.n += 4;
    const { written } = this.enc.encodeInto(s, this.buf.subarray(this.n));
    this.n += written;
    const save = this.n;
    this.n = at;
    this.u32(written);
    this.n = save;
  }
  float(v: number): void {
    this.room(9);
    this.buf[this.n++] = OP.BINFLOAT;
    this.dv8.setFloat64(0, v, false);
    for (let i = 0; i < 8; i++) this.buf[this.n++] = this.dv8.getUint8(i);
  }
  int(v: number | bigint): void {
    if (typeof v === "number" && v >= 0 && v < 0x100) {
      this.room(2);
      this.buf[this.n++] = OP.BININT1;
      this.buf[this.n++] = v;
    } else if (typeof v === "number" && v >= 0 && v < 0x10000) {
      this.room(3);
      this.buf[this.n++] = OP.BININT2;
      this.buf[this.n++] = v & 0xff;
      this.buf[this.n++] = v >>> 8;
    } else if (typeof v === "number" && v >= -0x80000000 && v <= 0x7fffffff) {
      this.byte(OP.BININT);
      this.u32(v >>> 0);
    } else {
      // LONG1: little-endian two's complement, as few bytes as keep the sign.
      let x = BigInt(v);
      const bytes: number[] = [];
      for (;;) {
        const b = Number(x & 0xffn);
        bytes.push(b);
        x >>= 8n;
        if ((x === 0n && b < 0x80) || (x === -1n && b >= 0x80)) break;
      }
      this.room(2 + bytes.length);
      this.buf[this.n++] = OP.LONG1;
      this.buf[this.n++] = bytes.length;
      for (const b of bytes) this.buf[this.n++] = b;
    }
  }
}

function write(out: Out, v: PickleData, depth: number): void {
  if (depth > 64) throw new RangeError("pickle: data nested more than 64 deep");
  if (v === null || v === undefined) return out.byte(OP.NONE);
  switch (typeof v) {
    case "boolean":
      return out.byte(v ? OP.NEWTRUE : OP.NEWFALSE);
    case "bigint":
      return out.int(v);
    case "number":
      if (Number.isSafeInteger(v)) return out.int(v);
      if (Number.isInteger(v)) return out.int(BigInt(v));
      return out.float(v);
    case "string":
      return out.str(v);
  }
  if (v instanceof Tuple) {
    const items = v.items;
    if (items.length === 0) return out.byte(OP.EMPTY_TUPLE);
    if (items.length > 3) out.byte(OP.MARK);
    for (const x of items) write(out, x, depth + 1);
    return out.byte(items.length === 1 ? OP.TUPLE1 : items.length === 2 ? OP.TUPLE2 : items.length === 3 ? OP.TUPLE3 : OP.TUPLE);
  }
  if (Array.isArray(v)) {
    out.byte(OP.EMPTY_LIST);
    for (let i = 0; i < v.length; i += BATCH) {
      out.byte(OP.MARK);
      for (let j = i; j < Math.min(v.length, i + BATCH); j++) write(out, v[j]!, depth + 1);
      out.byte(OP.APPENDS);
    }
    return;
  }
  if (typeof v === "object") {
    out.byte(OP.EMPTY_DICT);
    const keys = Object.keys(v).filter((k) => v[k] !== undefined);
    for (let i = 0; i < keys.length; i += BATCH) {
      out.byte(OP.MARK);
      for (let j = i; j < Math.min(keys.length, i + BATCH); j++) {
        out.str(keys[j]!);
        write(out, v[keys[j]!]!, depth + 1);
      }
      out.byte(OP.SETITEMS);
    }
    return;
  }
  throw new TypeError(`pickle: cannot write a ${typeof v}`);
}

/** Plain data → pickle bytes (protocol 2). */
export function pickle(v: PickleData): Uint8Array {
  const out = new Out();
  out.byte(OP.PROTO);
  out.byte(2);
  write(out, v, 0);
  out.byte(OP.STOP);
  return out.buf.subarray(0, out.n);
}
