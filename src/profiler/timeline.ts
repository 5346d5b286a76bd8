// Allocated, reserved and NVML-used over time, at several resolutions: fine buckets for the last
// minute, coarser ones further back. Every bucket keeps the min, the max and the last value of each
// series, so a spike that lasted one event is still there at the coarsest resolution. Each level is
// a fixed ring of buckets: memory is bounded however long the run.
//
// Only the finest level is touched per event (a compare and two min/max); a bucket folds into the
// next level when it closes.

/** Bucket width (µs) and how many buckets each level keeps. */
export const TIMELINE_LEVELS: ReadonlyArray<{ width_us: number; buckets: number }> = [
  { width_us: 10_000, buckets: 6_000 }, // 10 ms, the last minute
  { width_us: 1_000_000, buckets: 3_600 }, // 1 s, the last hour
  { width_us: 60_000_000, buckets: 1_440 }, // 1 min, the last day
  { width_us: 3_600_000_000, buckets: 24 * 90 }, // 1 h, the last 90 days
];

// Fields of one bucket in a level's Float64Array (stride STRIDE).
const START = 0;
const A_MIN = 1;
const A_MAX = 2;
const A_LAST = 3;
const R_MIN = 4;
const R_MAX = 5;
const R_LAST = 6;
const N_MIN = 7;
const N_MAX = 8;
const N_LAST = 9;
const STRIDE = 10;
/** After a bucket's fields: the open finest bucket's end (see Timeline.fine). */
const FINE_END = STRIDE;

export interface TimelineBucket {
  start_us: number;
  allocated_min_bytes: number;
  allocated_max_bytes: number;
  allocated_last_bytes: number;
  reserved_min_bytes: number;
  reserved_max_bytes: number;
  reserved_last_bytes: number;
  /** null where no NVML sample fell in the bucket. */
  nvml_used_min_bytes: number | null;
  nvml_used_max_bytes: number | null;
  nvml_used_last_bytes: number | null;
}

export interface TimelineView {
  resolution_us: number;
  buckets: TimelineBucket[];
}

/** A level's ring before its first closed bucket. */
const EMPTY = new Float64Array(0);

class Level {
  /** Closed buckets; allocated at the first one (a device's levels hold ~1 MB, most of it for
   *  spans a short run never reaches, and a model is made for every process seen). */
  ring = EMPTY;
  head = 0; // next write position
  length = 0; // closed buckets held
  readonly open = new Float64Array(STRIDE);
  openStart = NaN;
  constructor(
    readonly width: number,
    readonly capacity: number,
  ) {}
}

function mergeInto(dst: Float64Array, src: Float64Array, srcOff: number): void {
  if (src[srcOff + A_MIN]! < dst[A_MIN]!) dst[A_MIN] = src[srcOff + A_MIN]!;
  if (src[srcOff + A_MAX]! > dst[A_MAX]!) dst[A_MAX] = src[srcOff + A_MAX]!;
  dst[A_LAST] = src[srcOff + A_LAST]!;
  if (src[srcOff + R_MIN]! < dst[R_MIN]!) dst[R_MIN] = src[srcOff + R_MIN]!;
  if (src[srcOff + R_MAX]! > dst[R_MAX]!) dst[R_MAX] = src[srcOff + R_MAX]!;
  dst[R_LAST] = src[srcOff + R_LAST]!;
  const nmin = src[srcOff + N_MIN]!;
  if (nmin === nmin) {
    // not NaN: this bucket has NVML samples
    if (!(nmin >= dst[N_MIN]!)) dst[N_MIN] = nmin;
    const nmax = src[srcOff + N_MAX]!;
    if (!(nmax <= dst[N_MAX]!)) dst[N_MAX] = nmax;
    dst[N_LAST] = src[srcOff + N_LAST]!;
  }
}

export class Timeline {
  private readonly levels: Level[];
  /**
   * The finest open bucket, in the bucket layout with its end time after it (FINE_END). A typed
   * array rather than ten number fields: with the fields, this per-event update cost about 40% of
   * the model's ingest on the recorded rings under Bun's JIT; on the typed array it is a few
   * compares and stores (ingest ~1.8× faster, measured with a fresh model on both real rings).
   */
  private readonly fine = new Float64Array(STRIDE + 1).fill(NaN);
  /** The open bucket's fields alone (what a closed bucket stores). */
  private readonly fineBucket = this.fine.subarray(0, STRIDE);

  constructor(levels = TIMELINE_LEVELS) {
    this.levels = levels.map((l) => new Level(l.width_us, l.buckets));
  }

  /** Per event: allocated and reserved after the event at time t. */
  observe(t: number, allocated: number, reserved: number): void {
    const f = this.fine;
    if (t < f[FINE_END]!) {
      // Same bucket (or a record a little out of order: writers on two threads). No branch on
      // t >= its start: a late record belongs to the bucket being filled.
      if (allocated < f[A_MIN]!) f[A_MIN] = allocated;
      else if (allocated > f[A_MAX]!) f[A_MAX] = allocated;
      if (reserved < f[R_MIN]!) f[R_MIN] = reserved;
      else if (reserved > f[R_MAX]!) f[R_MAX] = reserved;
      f[A_LAST] = allocated;
      f[R_LAST] = reserved;
      return;
    }
    this.openFine(t, allocated, reserved);
  }

  /** Where the open finest bucket ends (NaN before the first): a record before it falls in it. */
  get fineEnd(): number {
    return this.fine[FINE_END]!;
  }

  /** Records that fell in the open finest bucket (each before fineEnd), taken at once: the
   *  allocated bytes after them from aMin to aMax, aLast after the last; reserved likewise. What
   *  observe does for each, for a run of them (DeviceState.allocatorRecords). */
  extend(aMin: number, aMax: number, aLast: number, rMin: number, rMax: number, rLast: number): void {
    const f = this.fine;
    if (aMin < f[A_MIN]!) f[A_MIN] = aMin;
    if (aMax > f[A_MAX]!) f[A_MAX] = aMax;
    if (rMin < f[R_MIN]!) f[R_MIN] = rMin;
    if (rMax > f[R_MAX]!) f[R_MAX] = rMax;
    f[A_LAST] = aLast;
    f[R_LAST] = rLast;
  }

  /** An NVML sample of this process's used memory on the device. */
  observeNvml(t: number, used: number, allocated: number, reserved: number): void {
    const f = this.fine;
    if (!(t < f[FINE_END]!)) this.openFine(t, allocated, reserved);
    if (!(used >= f[N_MIN]!)) f[N_MIN] = used;
    if (!(used <= f[N_MAX]!)) f[N_MAX] = used;
    f[N_LAST] = used;
  }

  /** Close the open finest bucket (if any) and open the one `t` falls in, starting at these values. */
  private openFine(t: number, allocated: number, reserved: number): void {
    const f = this.fine;
    if (f[START] === f[START]) this.push(0, this.fineBucket, 0);
    const w = this.levels[0]!.width;
    f[START] = Math.floor(t / w) * w;
    f[FINE_END] = f[START]! + w;
    f[A_MIN] = f[A_MAX] = f[A_LAST] = allocated;
    f[R_MIN] = f[R_MAX] = f[R_LAST] = reserved;
    f[N_MIN] = f[N_MAX] = f[N_LAST] = NaN;
  }

  /** Store a closed bucket at `level` and fold it into the next level's open bucket. */
  private push(li: number, src: Float64Array, off: number): void {
    const level = this.levels[li]!;
    if (level.ring === EMPTY) level.ring = new Float64Array(level.capacity * STRIDE);
    level.ring.set(src.subarray(off, off + STRIDE), level.head * STRIDE);
    const stored = level.head * STRIDE;
    level.head = (level.head + 1) % level.capacity;
    if (level.length < level.capacity) level.length++;
    const up = this.levels[li + 1];
    if (!up) return;
    const start = Math.floor(level.ring[stored + START]! / up.width) * up.width;
    if (start !== up.openStart) {
      if (up.openStart === up.openStart) {
        up.open[START] = up.openStart;
        this.push(li + 1, up.open, 0);
      }
      up.open.set(level.ring.subarray(stored, stored + STRIDE));
      up.open[START] = start;
      up.openStart = start;
    } else mergeInto(up.open, level.ring, stored);
  }

  /**
   * Buckets at the finest level whose width is at least `resolution_us` (the coarsest level when
   * none is that coarse), oldest first, from `since_us` on. The open buckets of finer levels are
   * folded in, so the view reaches the latest event.
   */
  view(resolution_us = 0, since_us = -Infinity): TimelineView {
    let li = this.levels.findIndex((l) => l.width >= resolution_us);
    if (li < 0) li = this.levels.length - 1;
    const level = this.levels[li]!;
    const out: TimelineBucket[] = [];
    for (let k = 0; k < level.length; k++) {
      const pos = ((level.head - level.length + k + level.capacity) % level.capacity) * STRIDE;
      if (level.ring[pos + START]! + level.width <= since_us) continue;
      out.push(bucketAt(level.ring, pos));
    }
    // The still-open buckets of this level and of every finer one, oldest first: each lands in
    // the bucket of this level its start falls in.
    const fine = this.fine;
    if (fine[START] === fine[START]) {
      const pending = new Float64Array(STRIDE);
      let have = false;
      const add = (src: Float64Array, start: number) => {
        const aligned = Math.floor(start / level.width) * level.width;
        if (have && pending[START] === aligned) return mergeInto(pending, src, 0);
        if (have && pending[START]! + level.width > since_us) out.push(bucketAt(pending, 0));
        pending.set(src);
        pending[START] = aligned;
        have = true;
      };
      for (let l = li; l >= 1; l--) {
        const lv = this.levels[l]!;
        if (lv.openStart === lv.openStart) add(lv.open, lv.openStart);
      }
      add(this.fineBucket, fine[START]!);
      if (pending[START]! + level.width > since_us) out.push(bucketAt(pending, 0));
    }
    return { resolution_us: level.width, buckets: out };
  }
}

function nullable(v: number): number | null {
  return v === v ? v : null;
}

function bucketAt(a: Float64Array, p: number): TimelineBucket {
  return {
    start_us: a[p + START]!,
    allocated_min_bytes: a[p + A_MIN]!,
    allocated_max_bytes: a[p + A_MAX]!,
    allocated_last_bytes: a[p + A_LAST]!,
    reserved_min_bytes: a[p + R_MIN]!,
    reserved_max_bytes: a[p + R_MAX]!,
    reserved_last_bytes: a[p + R_LAST]!,
    nvml_used_min_bytes: nullable(a[p + N_MIN]!),
    nvml_used_max_bytes: nullable(a[p + N_MAX]!),
    nvml_used_last_bytes: nullable(a[p + N_LAST]!),
  };
}
