// Each training phase instance the device went through (its phase, its first record's time and the
// next one's), the newest PHASE_INSTANCES_MAX of them: what a phase strip under a ten-minute chart
// needs (profiler/phase-shares.ts), where the kept records (model.keepTrace, 100,000 of them) cover
// under a second of a busy training, and walking them every frame cost the Process screen 1.9 ms a
// second on an H200. Fed once a phase instance ends (DeviceState.endPhaseInstance: a few hundred a
// second at most), never per record. A phase lasts from the stamp change that began it to the one
// that ended it (the process's marks among them), as the step breakdown counts it: within a few
// hundredths of a column of the walk over the kept records (phase-shares.ts), which times a phase
// from record to record.

/** About ten minutes of a busy training (four phases a step, 54 steps a second): 1.2 MiB at most,
 *  reached only by one that busy; a slow training's ring holds hours. */
export const PHASE_INSTANCES_MAX = 1 << 17;

export class PhaseHistory {
  /** The instances in a ring, oldest at `head - n`: allocated at the first, grown to the max. */
  private start = new Float64Array(0);
  private end = new Float64Array(0);
  private phase = new Uint8Array(0);
  private head = 0;
  private n = 0;

  /** Phase `phase` lasted from `a` to `b` (µs). Kept in time order, none overlapping (a stamp
   *  behind the last instance's end, threads' stamps or a clock set back, starts at that end):
   *  addShares finds a window's first instance by its end. */
  add(phase: number, a: number, b: number): void {
    if (this.n > 0) a = Math.max(a, this.end[this.at(this.n - 1)]!);
    if (!(b > a)) return;
    if (this.n === this.start.length && this.n < PHASE_INSTANCES_MAX) this.grow();
    const cap = this.start.length;
    this.start[this.head] = a;
    this.end[this.head] = b;
    this.phase[this.head] = phase;
    this.head = (this.head + 1) % cap;
    if (this.n < cap) this.n++;
  }

  /** Adds to `out` (column c, phase p at c * N_PHASE + p) each phase's time in `columns` equal
   *  columns from `fromUs` to `toUs`, through `spread` (phase-shares.ts, the one the walk uses). */
  addShares(out: Float64Array, fromUs: number, toUs: number, columns: number, spread: (out: Float64Array, a: number, b: number, phase: number, fromUs: number, width: number, columns: number) => void): void {
    if (this.n === 0 || columns <= 0 || !(toUs > fromUs)) return;
    const width = (toUs - fromUs) / columns;
    // the first instance that ends after the window's start (they end in time order)
    let lo = 0;
    let hi = this.n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.end[this.at(mid)]! <= fromUs) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.n; i++) {
      const k = this.at(i);
      const a = this.start[k]!;
      if (a >= toUs) break;
      spread(out, Math.max(a, fromUs), Math.min(this.end[k]!, toUs), this.phase[k]!, fromUs, width, columns);
    }
  }

  /** The slot of the i-th oldest instance. */
  private at(i: number): number {
    const cap = this.start.length;
    return (this.head - this.n + i + cap) % cap;
  }

  private grow(): void {
    const cap = Math.min(PHASE_INSTANCES_MAX, Math.max(256, this.start.length * 2));
    const start = new Float64Array(cap);
    const end = new Float64Array(cap);
    const phase = new Uint8Array(cap);
    for (let i = 0; i < this.n; i++) {
      const k = this.at(i);
      start[i] = this.start[k]!;
      end[i] = this.end[k]!;
      phase[i] = this.phase[k]!;
    }
    this.start = start;
    this.end = end;
    this.phase = phase;
    this.head = this.n % cap;
  }
}
