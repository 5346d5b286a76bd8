// address → slot, as an open-addressing hash table on typed arrays (linear probing, backward-shift
// deletion, so no tombstones pile up over a long run). The per-event path of the model spends most
// of its time here: a JS Map with double keys costs ~3× as much per operation (bench/ingest.ts).

const EMPTY = -1;

/** Addresses are ≥ 0 and below 2^53; allocator addresses are multiples of 512. A function of the
 *  address alone, so that put and remove (the per-event path) apply their local copy of the mask
 *  instead of loading the map's for every entry the backward shift looks at. */
function hash(address: number): number {
  const lo = address >>> 0;
  const hi = (address / 4294967296) >>> 0;
  let h = Math.imul(lo ^ (lo >>> 16), 0x85ebca6b) ^ Math.imul(hi, 0xc2b2ae35);
  h ^= h >>> 13;
  h = Math.imul(h, 0x27d4eb2f);
  return h ^ (h >>> 16);
}

export class AddressMap {
  private keys: Float64Array;
  private vals: Int32Array;
  private mask: number;
  size = 0;

  constructor(capacity = 4096) {
    let n = 16;
    while (n < capacity * 2) n *= 2;
    this.keys = new Float64Array(n).fill(EMPTY);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
  }

  private home(address: number): number {
    return hash(address) & this.mask;
  }

  /** The slot stored for `address`, or undefined. */
  get(address: number): number | undefined {
    const keys = this.keys;
    let i = this.home(address);
    for (;;) {
      const k = keys[i]!;
      if (k === address) return this.vals[i]!;
      if (k === EMPTY) return undefined;
      i = (i + 1) & this.mask;
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
        return old;
      }
      if (k === EMPTY) break;
      i = (i + 1) & mask;
    }
    keys[i] = address;
    vals[i] = slot;
    if (++this.size * 2 > mask) this.grow();
    return -1;
  }

  delete(address: number): boolean {
    return this.remove(address) >= 0;
  }

  /** Remove `address`; the slot it had, or -1 (one probe for both). */
  remove(address: number): number {
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let i = hash(address) & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === EMPTY) return -1;
      if (k === address) break;
      i = (i + 1) & mask;
    }
    const removed = vals[i]!;
    // Backward shift: move later entries of the probe run into the hole when their home allows.
    let hole = i;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const k = keys[j]!;
      if (k === EMPTY) break;
      const h = hash(k) & mask;
      // j's entry may move to `hole` if its home is not in (hole, j] (cyclically).
      if (hole <= j ? h <= hole || h > j : h <= hole && h > j) {
        keys[hole] = k;
        vals[hole] = vals[j]!;
        hole = j;
      }
    }
    keys[hole] = EMPTY;
    this.size--;
    return removed;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const n = oldKeys.length * 2;
    this.keys = new Float64Array(n).fill(EMPTY);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
    this.size = 0;
    for (let i = 0; i < oldKeys.length; i++) if (oldKeys[i] !== EMPTY) this.set(oldKeys[i]!, oldVals[i]!);
  }

  /** Every stored slot (for queries, not the per-event path). */
  values(): Int32Array {
    const out = new Int32Array(this.size);
    let n = 0;
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== EMPTY) out[n++] = this.vals[i]!;
    return out;
  }
}
