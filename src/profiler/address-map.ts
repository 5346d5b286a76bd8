// address → slot, as an open-addressing hash table on typed arrays (linear probing; a removed entry
// keeps its key, see DEAD). Every allocator record of the model's ingest probes it once: a JS Map
// with double keys costs ~3× as much per operation (bench/ingest.ts), and moving entries back on
// each remove (no dead keys) cost a put and a remove of a real ring's records 7.2 ns a record
// against 4.5 with dead keys.

export const EMPTY = -1;

/** Addresses are ≥ 0 and below 2^53; allocator addresses are multiples of 512. A function of the
 *  address alone, so that put and remove (the per-event path) apply their local copy of the mask
 *  instead of loading the map's for every entry the backward shift looks at. */
export function hash(address: number): number {
  const lo = address >>> 0;
  const hi = (address / 4294967296) >>> 0;
  let h = Math.imul(lo ^ (lo >>> 16), 0x85ebca6b) ^ Math.imul(hi, 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h, 0x27d4eb2f);
  return h ^ (h >>> 16);
}

/** A value slot whose key was removed. The key stays: the caching allocator hands the same
 *  addresses out again and again, so the next put of that address finds its entry where its probe
 *  ends, and a remove is one store, with no later entries to move back. Dead keys are dropped when
 *  the table is rebuilt (grow). Values are slots, indexes and −1: never this. */
export const DEAD = -2147483648;

export class AddressMap {
  // Public for a caller that reads an entry at its position (DeviceState.allocatorRecords).
  keys: Float64Array;
  vals: Int32Array;
  mask: number;
  /** Live entries. */
  size = 0;
  /** Keys held, live or dead: what the probes cross. */
  used = 0;

  constructor(capacity = 4096) {
    let n = 16;
    while (n < capacity * 2) n *= 2;
    this.keys = new Float64Array(n).fill(EMPTY);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
  }

  /** Where `address` (`hh`: hash(address)) is in the table, or the empty entry where it would
   *  go: its one probe, for get, put and remove, and for a caller that looks before it changes
   *  anything (the model's loop: DeviceState.allocatorRecords). The key there is `address` or EMPTY. */
  position(address: number, hh: number): number {
    const keys = this.keys;
    const mask = this.mask;
    let i = hh & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === address || k === EMPTY) return i;
      i = (i + 1) & mask;
    }
  }

  /** Store `slot` for `address` at its position `i` (position's), without the rebuild put makes
   *  once half full (due says when). */
  putAt(i: number, address: number, slot: number): void {
    if (this.keys[i] === EMPTY) {
      this.keys[i] = address;
      this.used++;
      this.size++;
    } else if (this.vals[i] === DEAD) this.size++;
    this.vals[i] = slot;
  }

  /** Remove the live entry at position `i` (position's). */
  removeAt(i: number): void {
    this.vals[i] = DEAD;
    this.size--;
  }

  /** Half full of keys: rebuild (put does). */
  due(): boolean {
    return this.used * 2 > this.mask;
  }

  /** The slot stored for `address`, or undefined. */
  get(address: number): number | undefined {
    const i = this.position(address, hash(address));
    if (this.keys[i] !== address) return undefined;
    const v = this.vals[i]!;
    return v === DEAD ? undefined : v;
  }

  set(address: number, slot: number): void {
    this.put(address, slot);
  }

  /** Store `slot` for `address`; the slot it replaces, or -1 (one probe for both). */
  put(address: number, slot: number): number {
    const i = this.position(address, hash(address));
    const old = this.keys[i] === address ? this.vals[i]! : DEAD;
    this.putAt(i, address, slot);
    if (this.due()) this.rebuild();
    return old === DEAD ? -1 : old;
  }

  delete(address: number): boolean {
    return this.remove(address) !== -1;
  }

  /** Remove `address`; the slot it had, or -1 (one probe for both). */
  remove(address: number): number {
    const i = this.position(address, hash(address));
    if (this.keys[i] !== address) return -1;
    const removed = this.vals[i]!;
    if (removed === DEAD) return -1;
    this.removeAt(i);
    return removed;
  }

  /** Half full of keys: the live ones into a fresh table, twice as large where they fill a
   *  quarter of this one (so a table of mostly dead keys is rebuilt at its size). */
  rebuild(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const n = this.size * 4 > oldKeys.length ? oldKeys.length * 2 : oldKeys.length;
    this.keys = new Float64Array(n).fill(EMPTY);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
    this.size = 0;
    this.used = 0;
    for (let i = 0; i < oldKeys.length; i++) if (oldKeys[i] !== EMPTY && oldVals[i] !== DEAD) this.put(oldKeys[i]!, oldVals[i]!);
  }

  /** Every stored slot (for queries, not the per-event path). */
  values(): Int32Array {
    const out = new Int32Array(this.size);
    let n = 0;
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== EMPTY && this.vals[i] !== DEAD) out[n++] = this.vals[i]!;
    return out;
  }
}
