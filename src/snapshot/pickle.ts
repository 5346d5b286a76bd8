// A safe reader for the pickles PyTorch writes as memory snapshots (torch.cuda.memory._dump_snapshot).
//
// Snapshots are plain data: dicts, lists, tuples, strings, numbers, booleans, None. Only the
// opcodes that build such data are read; any opcode that would import or call something
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, persistent ids…) is refused, so no code
// in a file ever runs. Every length is checked against the bytes that remain, and the number of
// objects and the stack are bounded, so a hostile or truncated file costs bounded memory and ends
// in a SnapshotError that says where.
//
// The machine is fed in chunks (a file read piece by piece, a gzip stream), so a file never has to
// be in memory whole: an opcode cut by a chunk's end waits for the next chunk. A `take` hook sees
// every item appended to a list and may keep it out of the tree (a snapshot's trace entries go to
// typed columns instead, see trace-columns.ts); the memo then forgets them too, so the tree holds
// only what is left (segments, annotations, settings) and memory stays below the file's size.

import { Memo, TAKEN } from "./memo";
import { DEFAULT_LIMITS, SnapshotError, tooManyObjects, type PickleHooks, type PickleLimits, type PickleMachine, type PickleValue } from "./pickle-contract";

export { SnapshotError, type PickleHooks, type PickleLimits, type PickleMachine, type PickleValue };

const MARK = Symbol("mark");
type StackItem = PickleValue | typeof MARK;

/** Thrown inside the machine when an opcode runs past the bytes fed so far. */
const MORE = Symbol("more");

const REFUSED: Record<number, string> = {
  0x63: "GLOBAL",
  0x93: "STACK_GLOBAL",
  0x52: "REDUCE",
  0x62: "BUILD",
  0x69: "INST",
  0x6f: "OBJ",
  0x81: "NEWOBJ",
  0x92: "NEWOBJ_EX",
  0x50: "PERSID",
  0x51: "BINPERSID",
  0x82: "EXT1",
  0x83: "EXT2",
  0x84: "EXT4",
  0x96: "BYTEARRAY8",
  0x97: "NEXT_BUFFER",
  0x98: "READONLY_BUFFER",
};

/** The longest string or byte string accepted. A snapshot's longest is a file name or a frame's
 *  name: 1,960 bytes in test/fixtures/snapshots (a C++ frame), 2,000 times less. An item is held
 *  whole before it is decoded, so this is also what one item can cost: a gzip'd file of one
 *  string of 255 MiB took 25 s and 1.4 GB to refuse when items of 256 MiB were accepted. */
export const MAX_ITEM_BYTES = 4 * 1024 ** 2;

export function pickleMachine(limits: PickleLimits = DEFAULT_LIMITS, hooks?: PickleHooks): PickleMachine {
  let data: Uint8Array = new Uint8Array(0);
  let view = new DataView(data.buffer);
  let base = 0; // the file offset of data[0]
  let pos = 0;
  let last = false;
  let done = false;
  let result: PickleValue | undefined;
  const text = new TextDecoder("utf-8", { fatal: false });
  const stack: StackItem[] = [];
  const marks: number[] = [];
  const memo = new Memo<PickleValue>();
  let objects = 0;
  // Taken items (and the containers directly inside them) leave the memo at the end of their batch.
  const taken = new Set<unknown>();
  // Short strings (dict keys, actions, file names) repeat: the same bytes give the same string.
  const internBytes: (Uint8Array | undefined)[] = new Array(4096);
  const internText: string[] = new Array(4096);

  // An opcode cut by a chunk's end that needs `wanted` bytes (a file offset) before it can run: the
  // chunks until then wait here and are joined once, not the waiting bytes copied again for every
  // chunk (quadratic in the item's length).
  let wanted = 0;
  let waiting: Uint8Array[] = [];
  let waitingBytes = 0;

  const fail = (why: string): never => {
    throw new SnapshotError(`not a readable snapshot pickle: ${why} (at byte ${base + pos}${last ? ` of ${base + data.length}` : ""})`);
  };
  const need = (n: number) => {
    if (pos + n <= data.length) return;
    if (n > MAX_ITEM_BYTES) fail(`an item of ${n} bytes: a length past any real file (a string or bytes of ${MAX_ITEM_BYTES} at most)`);
    if (!last) {
      wanted = base + pos + n;
      throw MORE;
    }
    fail(`truncated: ${n} more bytes needed, ${data.length - pos} left`);
  };
  const u8 = () => (need(1), data[pos++]!);
  const u16 = () => (need(2), (pos += 2), view.getUint16(pos - 2, true));
  const u32 = () => (need(4), (pos += 4), view.getUint32(pos - 4, true));
  const i32 = () => (need(4), (pos += 4), view.getInt32(pos - 4, true));
  const u64 = () => {
    need(8);
    const v = view.getBigUint64(pos, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail("a length past any real file");
    pos += 8;
    return Number(v);
  };
  const bytes = (n: number) => {
    need(n);
    pos += n;
    return data.subarray(pos - n, pos);
  };
  const push = (v: StackItem) => {
    if (stack.length >= limits.maxStack) fail(`more than ${limits.maxStack} items on the stack`);
    if (++objects > limits.maxObjects) fail(tooManyObjects(limits));
    stack.push(v);
  };
  const pop = (): PickleValue => {
    const v = stack.pop();
    if (v === undefined) fail("stack underflow");
    if (v === MARK) fail("a mark where a value was expected");
    return v as PickleValue;
  };
  const top = (): PickleValue => {
    const v = stack[stack.length - 1];
    if (v === undefined || v === MARK) fail("no value on the stack");
    return v as PickleValue;
  };
  const popMark = (): PickleValue[] => {
    const m = marks.pop();
    if (m === undefined) fail("no mark to pop to");
    const items = stack.splice(m!) as PickleValue[];
    items.shift(); // the mark itself
    return items;
  };
  // A snapshot's dict keys are strings (and numbers would do): anything else (a tuple, which may be a
  // DAG of itself whose written-out form is exponential) is refused, not turned into a string.
  const key = (k: PickleValue): string => {
    if (typeof k === "string") return k;
    if (typeof k === "number") return String(k);
    return fail(`a dict key that is ${k === null ? "None" : Array.isArray(k) ? "a tuple or list" : typeof k === "boolean" ? "a boolean" : k instanceof Uint8Array ? "bytes" : "a dict"}: a snapshot's keys are strings`);
  };
  // SETITEMS and APPENDS read their items where they lie on the stack (from `from` to its top) and
  // then cut it there: no array of them is made (millions of entries, each a SETITEMS).
  const setItems = (target: PickleValue, items: readonly StackItem[], from: number) => {
    if (target === null || typeof target !== "object" || Array.isArray(target) || target instanceof Uint8Array) fail("SETITEM(S) on something that is not a dict");
    if ((items.length - from) % 2) fail("SETITEMS with an odd number of items");
    const obj = target as { [k: string]: PickleValue };
    for (let i = from; i < items.length; i += 2) obj[key(items[i] as PickleValue)] = items[i + 1] as PickleValue;
  };
  /** The stack's items above the innermost mark, and where they start; the mark stays until `cut`. */
  const markAt = (): number => {
    const m = marks.pop();
    if (m === undefined) fail("no mark to pop to");
    if (m! < 1) fail("no value below the mark");
    return m!;
  };
  const cut = (m: number) => {
    stack.length = m;
  };
  const forgetTaken = () => {
    objects -= hooks!.forget?.() ?? 0;
    memo.settle(taken, hooks!.standIn.bind(hooks), hooks!.forgotten?.bind(hooks));
    taken.clear();
    hooks!.settled();
  };
  const appendTo = (target: PickleValue, items: readonly StackItem[], from: number) => {
    if (!Array.isArray(target)) fail("APPEND(S) on something that is not a list");
    const list = target as PickleValue[];
    if (!hooks) {
      for (let i = from; i < items.length; i++) list.push(items[i] as PickleValue);
      return;
    }
    for (let i = from; i < items.length; i++) {
      const it = items[i] as PickleValue;
      const n = hooks.take(it, list);
      if (n === 0) {
        list.push(it);
        continue;
      }
      objects -= n;
      taken.add(it);
      for (const k in it as object) {
        const v = (it as Record<string, PickleValue>)[k];
        if (v !== null && typeof v === "object") taken.add(v);
      }
    }
    if (taken.size) forgetTaken();
  };
  // Little-endian two's complement, exact wherever the value is a safe integer (|v| < 2^53);
  // past that it is the nearest double, itself past 2^53, which the readers of addresses and sizes
  // refuse (segments-check.ts). The arithmetic stays in doubles up to 8 bytes because BigInt per
  // integer is most of a large file's parse time (every time_us takes 7 bytes).
  const long = (n: number): number => {
    need(n);
    const at = pos;
    pos += n;
    if (n === 0) return 0;
    const negative = (data[at + n - 1]! & 0x80) !== 0;
    if (n <= 6) {
      let v = 0; // under 2^48: exact
      for (let i = at + n - 1; i >= at; i--) v = v * 256 + data[i]!;
      return negative ? v - 2 ** (8 * n) : v;
    }
    if (n <= 8) {
      // Two halves, each exact; their sum is exact whenever the value is a safe integer (a sum
      // of one unsigned 48-bit loop above would round -(2^52 + 1) to -2^52).
      const lo = (data[at]! | (data[at + 1]! << 8) | (data[at + 2]! << 16) | (data[at + 3]! << 24)) >>> 0;
      let hi = 0;
      for (let i = at + n - 1; i >= at + 4; i--) hi = hi * 256 + data[i]!;
      if (negative) hi -= 2 ** (8 * (n - 4));
      return hi * 2 ** 32 + lo;
    }
    let v = 0n; // longer than any field a snapshot holds (2^64 - 1, an unknown line, takes 9): rare
    for (let i = at + n - 1; i >= at; i--) v = (v << 8n) | BigInt(data[i]!);
    return Number(BigInt.asIntN(8 * n, v));
  };
  // A string of the next n bytes, read where it lies (no view made for it: one a string is most of
  // a large file's garbage).
  const str = (n: number): string => {
    need(n);
    const at = pos;
    pos += n;
    if (n > 48) return text.decode(data.subarray(at, at + n));
    let h = 0x811c9dc5;
    let ascii = true;
    for (let i = at; i < at + n; i++) {
      const c = data[i]!;
      if (c >= 0x80) ascii = false;
      h = Math.imul(h ^ c, 16777619);
    }
    const k = (h >>> 0) & 4095;
    const known = internBytes[k];
    if (known !== undefined && known.length === n) {
      let same = true;
      for (let i = 0; i < n; i++) if (known[i] !== data[at + i]) (same = false), (i = n);
      if (same) return internText[k]!;
    }
    const b = data.slice(at, at + n);
    const s = ascii ? String.fromCharCode.apply(null, b as unknown as number[]) : text.decode(b);
    internBytes[k] = b;
    internText[k] = s;
    return s;
  };

  const step = (): boolean => {
    const op = u8();
    switch (op) {
      case 0x80: // PROTO
        if (u8() > 5) fail("pickle protocol newer than 5");
        break;
      case 0x95: // FRAME: a length hint only
        u64();
        break;
      case 0x2e: // STOP
        if (stack.length !== 1) fail(`${stack.length} items left on the stack at the end`);
        result = pop();
        return true;
      case 0x28: // MARK
        marks.push(stack.length);
        push(MARK);
        objects--;
        break;
      case 0x7d: // EMPTY_DICT
        push({});
        break;
      case 0x5d: // EMPTY_LIST
      case 0x29: // EMPTY_TUPLE
      case 0x8f: // EMPTY_SET
        push([]);
        break;
      case 0x74: // TUPLE
      case 0x91: // FROZENSET
        push(popMark());
        break;
      case 0x85: // TUPLE1
        push([pop()]);
        break;
      case 0x86: {
        // TUPLE2
        const b = pop();
        push([pop(), b]);
        break;
      }
      case 0x87: {
        // TUPLE3
        const c = pop();
        const b = pop();
        push([pop(), b, c]);
        break;
      }
      case 0x61: {
        // APPEND
        top(); // a value, not a mark
        if (stack.length < 2) fail("APPEND without a list to append to");
        appendTo(stack[stack.length - 2] as PickleValue, stack, stack.length - 1);
        stack.pop();
        break;
      }
      case 0x65: // APPENDS
      case 0x90: {
        // ADDITEMS (sets become lists)
        const m = markAt();
        appendTo(stack[m - 1] as PickleValue, stack, m + 1);
        cut(m);
        break;
      }
      case 0x73: {
        // SETITEM
        if (stack.length < 3 || stack[stack.length - 1] === MARK || stack[stack.length - 2] === MARK) fail("SETITEM without a dict, a key and a value");
        setItems(stack[stack.length - 3] as PickleValue, stack, stack.length - 2);
        stack.length -= 2;
        break;
      }
      case 0x75: {
        // SETITEMS
        const m = markAt();
        setItems(stack[m - 1] as PickleValue, stack, m + 1);
        cut(m);
        break;
      }
      case 0x4a: // BININT
        push(i32());
        break;
      case 0x4b: // BININT1
        push(u8());
        break;
      case 0x4d: // BININT2
        push(u16());
        break;
      case 0x8a: // LONG1 (a cut read rolls back to the opcode: reads before any change are safe)
        push(long(u8()));
        break;
      case 0x8b: {
        // LONG4
        const n = i32();
        // (a negative length would step back onto this opcode, again and again)
        if (n < 0 || n > 8) fail(`an integer of ${n} bytes: no snapshot holds one`);
        push(long(n));
        break;
      }
      case 0x47: // BINFLOAT (big-endian)
        need(8);
        push(view.getFloat64(pos, false));
        pos += 8;
        break;
      case 0x4e: // NONE
        push(null);
        break;
      case 0x88: // NEWTRUE
        push(true);
        break;
      case 0x89: // NEWFALSE
        push(false);
        break;
      case 0x8c: // SHORT_BINUNICODE
        push(str(u8()));
        break;
      case 0x58: // BINUNICODE
        push(str(u32()));
        break;
      case 0x8d: // BINUNICODE8
        push(str(u64()));
        break;
      case 0x43: // SHORT_BINBYTES
        push(bytes(u8()).slice());
        break;
      case 0x42: // BINBYTES
        push(bytes(u32()).slice());
        break;
      case 0x8e: // BINBYTES8
        push(bytes(u64()).slice());
        break;
      case 0x94: // MEMOIZE
        memo.push(top());
        break;
      case 0x71: // BINPUT
        memo.set(u8(), top());
        break;
      case 0x72: {
        // LONG_BINPUT. Each memo entry costs an opcode of the file: an index past the bytes read
        // so far names an entry no pickler made.
        const i = u32();
        if (i > base + pos) fail(`memo index ${i} past the ${base + pos} bytes read so far`);
        memo.set(i, top());
        break;
      }
      case 0x68: // BINGET
      case 0x6a: {
        // LONG_BINGET
        const i = op === 0x68 ? u8() : u32();
        const v = memo.get(i);
        if (v === undefined) fail(`memo ${i} read before it was written`);
        if (v === TAKEN) fail(`memo ${i} is a trace entry, read again after it was taken: not a layout PyTorch writes`);
        push(v as PickleValue);
        break;
      }
      case 0x30: // POP
        stack.pop();
        break;
      case 0x31: // POP_MARK
        popMark();
        break;
      case 0x32: // DUP
        push(top());
        break;
      default:
        if (REFUSED[op]) fail(`it asks to run code (${REFUSED[op]}): refused, a memory snapshot never needs it`);
        fail(`unknown or text-protocol opcode 0x${op.toString(16)}`);
    }
    return false;
  };

  const run = () => {
    let at = pos;
    try {
      for (;;) {
        at = pos;
        if (pos >= data.length) {
          if (!last) return;
          fail("truncated: the file ends before its STOP opcode");
        }
        if (step()) {
          done = true;
          memo.release();
          return;
        }
      }
    } catch (e) {
      if (e !== MORE) throw e;
      pos = at; // the cut opcode runs again, whole, once the next chunk is here
    }
  };

  return {
    feed(chunk: Uint8Array, isLast: boolean): PickleValue | undefined {
      if (done) return result;
      if (pos < data.length && !isLast && base + data.length + waitingBytes + chunk.length < wanted) {
        // Still short of the cut opcode's bytes: kept, copied (a caller may reuse its buffers,
        // the one the opcode began in too).
        if (waiting.length === 0) {
          base += pos;
          data = data.slice(pos);
          pos = 0;
        }
        waiting.push(chunk.slice());
        waitingBytes += chunk.length;
        return undefined;
      }
      if (pos < data.length) {
        const joined = new Uint8Array(data.length - pos + waitingBytes + chunk.length);
        joined.set(data.subarray(pos));
        let at = data.length - pos;
        for (const w of waiting) {
          joined.set(w, at);
          at += w.length;
        }
        joined.set(chunk, at);
        waiting = [];
        waitingBytes = 0;
        base += pos;
        data = joined;
      } else {
        base += data.length;
        data = chunk;
      }
      pos = 0;
      view = new DataView(data.buffer, data.byteOffset, data.byteLength);
      last = isLast;
      run();
      return done ? result : undefined;
    },
    get offset() {
      return base + pos;
    },
    get objects() {
      return objects;
    },
  };
}

/** A whole pickle in memory → its value (the tree, nothing taken). */
export function unpickle(data: Uint8Array, limits: PickleLimits = DEFAULT_LIMITS): PickleValue {
  return pickleMachine(limits).feed(data, true)!;
}
