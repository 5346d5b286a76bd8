// What one block that carries a stack stands for in bytes per line. The hook records the stack of
// every allocation of stack_min_bytes or more, and of a smaller one with probability
// 1 - exp(-s/R) (R: stack_sample_bytes), as heap profilers sample by bytes allocated: divided by that
// probability, a sampled block's size makes the sum over a line's sampled blocks an unbiased
// estimate of the bytes that line holds, whatever the mix of sizes. Defined once: every sum of
// bytes per line (findings, the Tensors screen's `w`, the at-peak groups, Prometheus) goes through it.

/** How the stacks of a recording were taken (the manifest's stack_min_bytes and stack_sample_bytes). */
export interface StackSampling {
  /** Allocations this large all carry their stack (0: none does). */
  readonly minBytes: number;
  /** Smaller ones carry it at one per this many bytes allocated on average (0: none of them). */
  readonly sampleBytes: number;
}

/** The bytes a block of `size` with a stack stands for (its own size where it was not sampled:
 *  at or above the threshold, no sampling, or stacks taken by torch's history, which has them all).
 *  The hook sampled on the request's size and the block holds it rounded: for a small block the
 *  estimate is then within half a rounding step (512 bytes) of the bytes asked for. */
export function stackWeight(size: number, sampling: StackSampling | null | undefined): number {
  if (!sampling || sampling.sampleBytes <= 0 || size >= sampling.minBytes || size <= 0) return size;
  // -expm1(-x) is 1 - exp(-x) without the loss of precision of a tiny x.
  return size / -Math.expm1(-size / sampling.sampleBytes);
}

/** Whether a block of `size` without a stack may simply not have been sampled (then its line is
 *  unknown, not absent): below the threshold of a recording that samples. */
export function sampledOut(size: number, sampling: StackSampling | null | undefined): boolean {
  return !!sampling && sampling.sampleBytes > 0 && size < sampling.minBytes;
}

/**
 * Weighed sums that never claim more than there is. Each group (a line) holds its own blocks'
 * bytes (`raw`) and stands for more (`weighed`, stackWeight summed); what it stands for beyond its
 * own blocks can only be blocks that were not sampled, whose bytes are `pool`. Where the groups
 * together claim more than the pool holds (a handful of small blocks, one lucky sample), each
 * one's excess is cut in proportion. Returns each group's bytes (rounded) and what is left of the
 * pool: the groups and the rest then add up to the bytes there are.
 */
export function settle(raw: readonly number[], weighed: readonly number[], pool: number): { bytes: number[]; left: number } {
  let excess = 0;
  for (let i = 0; i < raw.length; i++) excess += Math.max(0, weighed[i]! - raw[i]!);
  const f = excess > pool ? pool / excess : 1;
  const bytes = raw.map((r, i) => Math.round(r + Math.max(0, weighed[i]! - r) * f));
  const claimed = bytes.reduce((s, b, i) => s + b - raw[i]!, 0);
  return { bytes, left: Math.max(0, pool - claimed) };
}
