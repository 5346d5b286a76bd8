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
  // Public for the model's loop, which probes the table in place (DeviceState.allocatorRecords):
  // it reads them again after a rebuild (put's, where `used` passes half the table).
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

  /** The slot stored for `address`, or undefined. */
  get(address: number): number | undefined {
    const keys = this.keys;
    const mask = this.mask;
    let i = hash(address) & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === address) {
        const v = this.vals[i]!;
        return v === DEAD ? undefined : v;
      }
      if (k === EMPTY) return undefined;
      i = (i + 1) & mask;
    }
  }

  set(address: number, slot: number): void {
    this.put(address, slot);
  }

  /** Store `slot` for `address`; the slot it replaces, or -1 (one probe for both). */
  put(address: number, slot: number): number {
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let i = hash(address) & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === address) {
        const old = vals[i]!;
        vals[i] = slot;
        if (old !== DEAD) return old;
        this.size++;
        return -1;
      }
      if (k === EMPTY) break;
      i = (i + 1) & mask;
    }
    keys[i] = address;
    vals[i] = slot;
    this.size++;
    if (++this.used * 2 > mask) this.rebuild();
    return -1;
  }

  delete(address: number): boolean {
    return this.remove(address) !== -1;
  }

  /** Remove `address`; the slot it had, or -1 (one probe for both). */
  remove(address: number): number {
    const keys = this.keys;
    const mask = this.mask;
    let i = hash(address) & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === address) break;
      if (k === EMPTY) return -1;
      i = (i + 1) & mask;
    }
    const vals = this.vals;
    const removed = vals[i]!;
    if (removed === DEAD) return -1;
    vals[i] = DEAD;
    this.size--;
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
