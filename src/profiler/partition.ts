// Binary search over an ordered range: the one loop the profiler's sorted lookups share.

/** The first index in [lo, hi) for which `before(i)` is false, where `before` is true for a prefix
 *  of the range and false after it; hi where it is true throughout. */
export function partitionPoint(lo: number, hi: number, before: (i: number) => boolean): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(mid)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
