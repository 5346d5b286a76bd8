// The segments of one device as the records say: cudaMalloc'd segments, and with expandable
// segments the ranges of mapped pages (a map right after a mapped range extends it; an unmap may
// shrink a range or split it in two). State only: segments.ts draws the map a view shows.

export interface SegmentEntry {
  address: number;
  size: number;
  stream: number;
  /** When the records showed it (absent for a segment a snapshot listed). */
  time_us?: number;
  /** Its pool (pools.ts poolKey); absent or 0: the default pool. */
  pool?: number;
}

export class SegmentTable {
  private readonly sizes = new Map<number, number>();
  private readonly streams = new Map<number, number>();
  private readonly times = new Map<number, number>();
  /** Each segment's pool where it is not the default one (the records' `extra`, pools.ts poolKey). */
  private readonly pools = new Map<number, number>();
  private approx = false;
  /** Counts every change: a key for the queries' caches. */
  changes = 0;

  get count(): number {
    return this.sizes.size;
  }

  /** True once an unmap or a free matched no segment: sizes are right in total, placement may not be. */
  get approximate(): boolean {
    return this.approx;
  }

  /** Addresses of the segments, lowest first. */
  addresses(): number[] {
    return [...this.sizes.keys()].sort((a, b) => a - b);
  }

  size(address: number): number | undefined {
    return this.sizes.get(address);
  }

  stream(address: number): number {
    return this.streams.get(address) ?? 0;
  }

  time(address: number): number | null {
    return this.times.get(address) ?? null;
  }

  /** The segment's pool as the records carried it (pools.ts poolKey; 0: the default pool). */
  pool(address: number): number {
    return this.pools.get(address) ?? 0;
  }

  /** segment_alloc (`counted`), or segment_map: pages mapped onto the end of a range on the same
   *  stream extend it into one segment. */
  add(address: number, size: number, stream: number, t: number, counted: boolean, pool = 0): void {
    if (!counted)
      for (const [start, len] of this.sizes)
        if (start + len === address && this.streams.get(start) === stream && this.pool(start) === pool) {
          this.sizes.set(start, len + size);
          this.changes++;
          return;
        }
    this.put(address, size, stream, t, pool);
  }

  /** segment_free (`counted`), or segment_unmap: pages unmapped from the end, the start or the
   *  middle of a mapped range, which then shrinks or splits in two. */
  remove(address: number, size: number, counted: boolean): void {
    if (this.sizes.get(address) === size) return this.drop(address);
    if (counted) {
      this.approx = true;
      return;
    }
    for (const [start, len] of this.sizes) {
      if (address < start || address + size > start + len) continue;
      const stream = this.streams.get(start) ?? 0;
      const time = this.times.get(start);
      const pool = this.pool(start);
      this.drop(start);
      if (address > start) this.put(start, address - start, stream, time, pool);
      const tail = start + len - (address + size);
      if (tail > 0) this.put(address + size, tail, stream, time, pool);
      return;
    }
    this.approx = true;
  }

  /** Replace every segment (a snapshot's list): the map is exact again. Returns their bytes. */
  replace(segments: ReadonlyArray<SegmentEntry>): number {
    this.sizes.clear();
    this.streams.clear();
    this.times.clear();
    this.pools.clear();
    this.approx = false;
    this.changes++;
    let bytes = 0;
    for (const s of segments) {
      this.put(s.address, s.size, s.stream, s.time_us, s.pool ?? 0);
      bytes += s.size;
    }
    return bytes;
  }

  private put(address: number, size: number, stream: number, t: number | undefined, pool = 0): void {
    this.changes++;
    this.sizes.set(address, size);
    this.streams.set(address, stream);
    if (t !== undefined) this.times.set(address, t);
    if (pool !== 0) this.pools.set(address, pool);
  }

  private drop(address: number): void {
    this.changes++;
    this.sizes.delete(address);
    this.streams.delete(address);
    this.times.delete(address);
    this.pools.delete(address);
  }
}
