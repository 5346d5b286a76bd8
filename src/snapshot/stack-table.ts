// Stacks of a snapshot, each kept once. A trace of millions of entries names the same few hundred
// frames and the same few thousand stacks over and over (a training loop runs the same code every
// step): each distinct frame (file, line, function) is kept once in columns, each distinct stack
// once as a run of frame ids, and an entry or block carries only its stack's id (0: no frames).
// PyTorch shares one dict per frame between stacks: once its entries are read, the memo keeps a
// FrameRef for it, known at once. A frame dict seen for the first time (in a file written without
// sharing, every one) is interned by content: its file and function as string ids, its line.
// Those first seen while a batch of entries is read are handed to the reader to forget (takeFresh).

import { DEFAULT_USER_FRAME_RULE, frameKind, type Frame, type UserFrameRule } from "../profiler/user-frame";
import { classify, HINT_NO_FRAMES, HINT_NONE, StackRef, strongerHint } from "./frames";

/**
 * The stand-in for a frame dict once its entry is read: the same fields (a reader of frames sees no
 * difference), one per distinct frame. A file whose frame dicts are not shared (a dict per frame
 * per entry) would otherwise keep every one of them in the memo.
 */
export class FrameRef {
  constructor(
    readonly id: number,
    readonly filename: string,
    readonly line: number,
    readonly name: string,
  ) {}
}

/** New frame dicts kept for the reader to forget, at most this many between two takes (more: no
 *  reader takes them, the table is asked outside a file's reading). */
const MAX_FRESH = 1 << 20;

function grown<T extends Uint32Array | Int32Array | Uint8Array>(a: T, need: number): T {
  if (need <= a.length) return a;
  let n = a.length * 2;
  while (n < need) n *= 2;
  const out = new (a.constructor as new (n: number) => T)(n);
  out.set(a);
  return out;
}

export class StackTable {
  private readonly strings: string[] = [""];
  private readonly stringIds = new Map<string, number>([["", 0]]);
  private frameFile = new Uint32Array(256);
  private frameName = new Uint32Array(256);
  private frameLine = new Int32Array(256);
  private frameHint = new Uint8Array(256);
  private nFrames = 0;
  /** Frame ids by file id and function id (file * 2^26 + function), then by line. */
  private readonly frameByKey = new Map<number, Map<number, number>>();
  private readonly frameRefs: (FrameRef | undefined)[] = [];
  /** Frame dicts first seen since the last takeFresh, with their ids; and those of the take before
   *  (their stand-ins are asked for while the memo settles). */
  private batch = new Map<object, number>();
  private standing = new Map<object, number>();
  /** The objects the batch's dicts held (2 a key: the key and its value). */
  private batchObjects = 0;
  /** Stack s is flat[start[s] .. start[s + 1]); stack 0 is the empty one. */
  private flat = new Uint32Array(4096);
  private start = new Uint32Array(256);
  private stackHint = new Uint8Array(256);
  private nStacks = 1;
  /** Open addressing: stack ids by their frames' hash (−1 free). */
  private table = new Int32Array(1024).fill(-1);
  private scratch = new Uint32Array(64);
  private readonly refs: (StackRef | undefined)[] = [];
  /** Per frame under the rule last asked: 0 unknown, 1 user, 2 library or native. */
  private kinds = new Uint8Array(0);
  private kindsRule: UserFrameRule | null = null;

  /** Distinct stacks (the empty one included) and frames. */
  get stacks(): number {
    return this.nStacks;
  }
  get frameCount(): number {
    return this.nFrames;
  }

  /** The id of a frames list (a list of frame dicts, or the stand-in the memo kept for one); 0 for
   *  none or an empty one. Items that are not dicts are left out. */
  of(frames: unknown): number {
    if (frames instanceof StackRef) return frames.stack;
    if (!Array.isArray(frames) || frames.length === 0) return 0;
    if (this.scratch.length < frames.length) this.scratch = grown(this.scratch, frames.length);
    const ids = this.scratch;
    let n = 0;
    let h = 0x811c9dc5;
    for (const fr of frames) {
      if (fr === null || typeof fr !== "object") continue;
      const id = this.frameId(fr as object);
      ids[n++] = id;
      h = Math.imul(h ^ id, 16777619);
    }
    if (n === 0) return 0;
    h = Math.imul(h ^ n, 16777619) >>> 0;
    const mask = this.table.length - 1;
    for (let k = h & mask; ; k = (k + 1) & mask) {
      const s = this.table[k]!;
      if (s < 0) return this.add(k, n);
      if (this.same(s, ids, n)) return s;
    }
  }

  /** The frame dicts first seen since the last call become the ones a reader forgets (isFresh;
   *  its memo keeps their stand-ins, frameStandIn, instead). Returns the objects they held. */
  takeFresh(): number {
    this.standing = this.batch;
    this.batch = new Map();
    const n = this.batchObjects;
    this.batchObjects = 0;
    return n;
  }

  /** Whether `v` is a frame dict of the last takeFresh. */
  isFresh(v: object): boolean {
    return this.standing.has(v);
  }

  /** The stand-in for a frame dict of the last takeFresh, or undefined for anything else. */
  frameStandIn(v: unknown): FrameRef | undefined {
    if (v === null || typeof v !== "object") return undefined;
    const id = this.standing.get(v);
    return id === undefined ? undefined : this.frameRef(id);
  }

  private frameRef(id: number): FrameRef {
    return (this.frameRefs[id] ??= new FrameRef(id, this.strings[this.frameFile[id]!]!, this.frameLine[id]!, this.strings[this.frameName[id]!]!));
  }

  /** The stand-in for a list of stack `id` (one per stack). */
  ref(id: number): StackRef {
    return (this.refs[id] ??= new StackRef(this.hint(id), id));
  }

  /** What the stack says of the phase it was allocated in (frames.ts's hints). */
  hint(id: number): number {
    return id === 0 ? HINT_NO_FRAMES : this.stackHint[id]!;
  }

  /** How many frames the stack has. */
  depth(id: number): number {
    return id <= 0 || id >= this.nStacks ? 0 : this.start[id + 1]! - this.start[id]!;
  }

  /** The stack's frames, innermost first (new objects: ask for the rows shown, not for all). */
  frames(id: number, limit = Infinity): Frame[] {
    const out: Frame[] = [];
    if (id <= 0 || id >= this.nStacks) return out;
    const end = Math.min(this.start[id + 1]!, this.start[id]! + limit);
    for (let k = this.start[id]!; k < end; k++) out.push(this.frame(this.flat[k]!));
    return out;
  }

  /** The index of the stack's user frame (profiler/user-frame.ts) under `rule`, or −1. */
  userFrame(id: number, rule: UserFrameRule = DEFAULT_USER_FRAME_RULE): number {
    if (id <= 0 || id >= this.nStacks) return -1;
    if (this.kindsRule !== rule) (this.kindsRule = rule), (this.kinds = new Uint8Array(this.nFrames));
    if (this.kinds.length < this.nFrames) this.kinds = grown(this.kinds, this.nFrames);
    for (let k = this.start[id]!; k < this.start[id + 1]!; k++) {
      const f = this.flat[k]!;
      if (this.kinds[f] === 0) this.kinds[f] = frameKind(this.strings[this.frameFile[f]!]!, rule) === "user" ? 1 : 2;
      if (this.kinds[f] === 1) return k - this.start[id]!;
    }
    return -1;
  }

  private frame(f: number): Frame {
    return { file: this.strings[this.frameFile[f]!]!, line: this.frameLine[f]!, name: this.strings[this.frameName[f]!]! };
  }

  private frameId(fr: object): number {
    if (fr instanceof FrameRef) return fr.id;
    const known = this.batch.get(fr);
    if (known !== undefined) return known;
    const { filename, line, name } = fr as { filename?: unknown; line?: unknown; name?: unknown };
    const file = typeof filename === "string" ? filename : "";
    const fn = typeof name === "string" ? name : "";
    const ln = typeof line === "number" && Number.isInteger(line) && Math.abs(line) < 2 ** 31 ? line : 0;
    // Strings read from a pickle are the same string objects each time: their hashes are cached.
    const key = this.string(file) * 2 ** 26 + this.string(fn);
    let lines = this.frameByKey.get(key);
    if (lines === undefined) this.frameByKey.set(key, (lines = new Map()));
    let id = lines.get(ln);
    if (id === undefined) {
      id = this.nFrames++;
      if (id >= this.frameFile.length) {
        this.frameFile = grown(this.frameFile, id + 1);
        this.frameName = grown(this.frameName, id + 1);
        this.frameLine = grown(this.frameLine, id + 1);
        this.frameHint = grown(this.frameHint, id + 1);
      }
      this.frameFile[id] = this.string(file);
      this.frameName[id] = this.string(fn);
      this.frameLine[id] = ln;
      this.frameHint[id] = classify(file, fn);
      lines.set(ln, id);
    }
    if (this.batch.size >= MAX_FRESH) this.batch.clear(); // nobody takes them: not reading a file
    this.batch.set(fr, id);
    this.batchObjects += 2 * (+(filename !== undefined) + +(line !== undefined) + +(name !== undefined));
    return id;
  }

  private string(s: string): number {
    let id = this.stringIds.get(s);
    if (id === undefined) {
      id = this.strings.length;
      if (id >= 2 ** 26) throw new RangeError("more than 2^26 distinct file and function names in a snapshot's frames");
      this.strings.push(s);
      this.stringIds.set(s, id);
    }
    return id;
  }

  private same(s: number, ids: Uint32Array, n: number): boolean {
    const a = this.start[s]!;
    if (this.start[s + 1]! - a !== n) return false;
    for (let i = 0; i < n; i++) if (this.flat[a + i] !== ids[i]) return false;
    return true;
  }

  private add(slot: number, n: number): number {
    const id = this.nStacks++;
    this.start = grown(this.start, id + 2);
    this.stackHint = grown(this.stackHint, id + 1);
    const at = this.start[id]!;
    this.flat = grown(this.flat, at + n);
    let hint = HINT_NONE;
    for (let i = 0; i < n; i++) {
      const f = this.scratch[i]!;
      this.flat[at + i] = f;
      hint = strongerHint(hint, this.frameHint[f]!);
    }
    this.start[id + 1] = at + n;
    this.stackHint[id] = hint;
    this.table[slot] = id;
    if (this.nStacks * 2 > this.table.length) this.rehash();
    return id;
  }

  private rehash(): void {
    const table = new Int32Array(this.table.length * 2).fill(-1);
    const mask = table.length - 1;
    for (let s = 1; s < this.nStacks; s++) {
      let h = 0x811c9dc5;
      const a = this.start[s]!;
      const n = this.start[s + 1]! - a;
      for (let i = 0; i < n; i++) h = Math.imul(h ^ this.flat[a + i]!, 16777619);
      h = Math.imul(h ^ n, 16777619) >>> 0;
      let k = h & mask;
      while (table[k]! >= 0) k = (k + 1) & mask;
      table[k] = s;
    }
    this.table = table;
  }
}
