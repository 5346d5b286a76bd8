// The pickle memo, compact. Python's pickler memoizes every dict, list and new string, so a
// snapshot of millions of trace entries has tens of millions of memo slots. Slots written since
// the last settle sit in a plain array; settling (after each batch of trace entries is taken)
// turns them into 4-byte codes: taken (a later read is refused), or the index of a value kept
// once (the same string or object in many slots is one value). A pickler writes slots in order
// (each the next one); one written past the next is kept apart, in a map, so that an index never
// sizes anything.

/** A memo slot whose object a take hook took. */
export const TAKEN = Symbol("taken");

const CODE_TAKEN = -1;
const CODE_UNWRITTEN = -2;

/** V: the reader's value type (the pickle reader's V). */
export class Memo<V> {
  // Grows in place (a resizable buffer): no copy of tens of millions of codes.
  private readonly buffer = new ArrayBuffer(4096, { maxByteLength: 4 * 2 ** 30 });
  private readonly codes = new Int32Array(this.buffer);
  private settled = 0;
  private recent: (V | typeof TAKEN | undefined)[] = [];
  private readonly values: (V | typeof TAKEN)[] = [];
  private readonly index = new Map<unknown, number>();
  /** Slots written out of order, past the next one: as many as such writes, whatever their index. */
  private readonly sparse = new Map<number, V>();

  get length(): number {
    return this.settled + this.recent.length;
  }

  push(v: V): void {
    this.recent.push(v);
  }

  set(i: number, v: V): void {
    if (i < this.settled) this.codes[i] = this.keep(v);
    else if (i <= this.length) this.recent[i - this.settled] = v;
    else this.sparse.set(i, v);
  }

  /** The value in slot i; undefined where nothing was written; TAKEN where its object was taken. */
  get(i: number): V | typeof TAKEN | undefined {
    if (i >= this.length) return this.sparse.get(i);
    if (i >= this.settled) return this.recent[i - this.settled] ?? this.sparse.get(i);
    const c = this.codes[i]!;
    return c === CODE_TAKEN ? TAKEN : c === CODE_UNWRITTEN ? undefined : this.values[c];
  }

  /** Every recent slot to codes: objects in `taken` (or `forgotten`) become their stand-in, or TAKEN. */
  settle(taken: Set<unknown>, standIn: (v: unknown) => V | undefined, forgotten?: (v: object) => boolean): void {
    const n = this.recent.length;
    if (this.settled + n > this.codes.length) {
      const want = 4 * Math.ceil((this.settled + n) * 1.25);
      if (want > this.buffer.maxByteLength) throw new RangeError("a pickle memo of more than 2^30 slots");
      this.buffer.resize(want);
    }
    for (let k = 0; k < n; k++) {
      const v = this.recent[k];
      let code: number;
      if (v === undefined) code = CODE_UNWRITTEN;
      else if (v === TAKEN) code = CODE_TAKEN;
      else if (taken.has(v) || (forgotten !== undefined && typeof v === "object" && v !== null && forgotten(v))) {
        const s = standIn(v);
        code = s === undefined ? CODE_TAKEN : this.keep(s);
      } else code = this.keep(v);
      this.codes[this.settled + k] = code;
    }
    this.settled += n;
    this.recent = [];
  }

  /** Forget everything (the pickle's STOP was read: nothing reads the memo again); its codes'
   *  memory goes back at once, whatever still holds the memo. */
  release(): void {
    this.buffer.resize(0);
    this.settled = 0;
    this.recent = [];
    this.values.length = 0;
    this.index.clear();
    this.sparse.clear();
  }

  private keep(v: V): number {
    let i = this.index.get(v);
    if (i === undefined) {
      i = this.values.length;
      this.values.push(v);
      this.index.set(v, i);
    }
    return i;
  }
}
