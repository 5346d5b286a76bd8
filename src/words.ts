// Numbers in words, for findings' evidence and for the screens: bytes in binary units as PyTorch
// users read them, shares as percentages. Numbers stay numbers in every JSON output; these strings
// only make a sentence or a cell readable.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1536 → "1.50 KiB"; negative values keep their sign. */
export function formatBytes(bytes: number): string {
  const sign = bytes < 0 ? "-" : "";
  let v = Math.abs(bytes);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${sign}${v} B` : `${sign}${v.toFixed(2)} ${UNITS[u]}`;
}

/** 0.613 → "61%". */
export function formatShare(share: number): string {
  return `${Math.round(share * 100)}%`;
}

/** What the screens and sentences call the phase the schema names "other" (memory allocated
 *  outside forward, backward and the optimizer: model set-up, data loading, logging). "other" is
 *  also a tensor category; one word for each keeps a table's PHASE and CATEGORY apart. JSON keeps
 *  the schema's name. */
export const OUTSIDE_PHASE = "outside";

/** A phase name as the screens show it: "outside" for "other", the others as they are. */
export function phaseLabel(phase: string): string {
  return phase === "other" ? OUTSIDE_PHASE : phase;
}

const OUTSIDE_WORDS = "outside forward, backward and the optimizer";

/** In a phase, as a sentence says it: "in backward", "outside forward, backward and the optimizer". */
export function inPhase(phase: string): string {
  return phase === "other" ? OUTSIDE_WORDS : `in ${phase}`;
}

/** Where in a step something happened: "in backward of step 3", or "in step 3, outside forward,
 *  backward and the optimizer" (no phase known: "in step 3"). */
export function inPhaseOfStep(phase: string | null, step: number): string {
  if (phase === null) return `in step ${step}`;
  return phase === "other" ? `in step ${step}, ${OUTSIDE_WORDS}` : `in ${phase} of step ${step}`;
}

/**
 * Memory the caching allocator holds that no tensor uses: reserved − allocated (torch's
 * memory_reserved() − memory_allocated()). One name for it on every screen, in every finding and
 * JSON description: PyTorch's own, from its out-of-memory message ("reserved by PyTorch but
 * unallocated"). Not "fragmentation": most of it is the cache working as meant (blocks kept for
 * the step's next peak), and fragmentation is one cause of it, said as such where it is the
 * cause. Not "cached" alone either: memory_cached() was torch's old name for all of reserved.
 * JSON keys spell it `reserved_unallocated`.
 */
export const UNALLOCATED = "reserved but unallocated";

/** "6.16 GiB reserved but unallocated". */
export function unallocatedWords(bytes: number): string {
  return `${formatBytes(bytes)} ${UNALLOCATED}`;
}

/** Memory of CUDA graphs (torch.compile mode="reduce-overhead", torch.cuda.graph) and of
 *  torch.cuda.MemPool lives in pools of its own, apart from the default pool every other tensor
 *  comes from: PyTorch's name for them. */
export const PRIVATE_POOLS = "private pools (CUDA graphs, torch.cuda.MemPool)";

/** A private pool as PyTorch prints its id (segment_pool_id, a pair): "pool (1, 0)". */
export function poolLabel(id: readonly number[]): string {
  return `pool (${id.join(", ")})`;
}

/** "1 block", "3 blocks": a count and its noun, singular where it is one (`many`: an irregular plural). */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
