// The Python stacks a live agent's hook captured (the manifest's `stacks`, id → frames; the alloc
// records carry the id) as the BlockStacks the profiler reads: blocks carry their stack id, so
// stackOf has nothing to add. Ids come in records up to a sync before their frames reach the
// manifest: until then a stack has no frames, and its user frame is asked again later.
import { userFrameRuleFromEnv } from "../snapshot/block-stacks";
import type { StackSampling } from "../profiler/stack-weight";
import { userFrameIndex, type BlockStacks, type Frame, type UserFrameRule } from "../profiler/user-frame";
import type { Manifest } from "../system/manifest";
import { SEED_STACK_BASE, type Seed } from "../profiler/seed";

export class ManifestStacks implements BlockStacks {
  private readonly table = new Map<number, Frame[]>();
  private readonly users = new Map<number, number>();
  /** The hook's threshold and sampling (the manifest's stack_min_bytes and stack_sample_bytes). */
  sampling: StackSampling | null = null;

  constructor(private readonly rule: UserFrameRule = userFrameRuleFromEnv()) {}

  /** Take the stacks of a manifest (ids already known keep their frames: a stack never changes). */
  update(stacks: Manifest["stacks"], m?: Pick<Manifest, "stack_min_bytes" | "stack_sample_bytes">): this {
    if (m) this.sampling = { minBytes: m.stack_min_bytes, sampleBytes: m.stack_sample_bytes ?? 0 };
    for (const [id, frames] of Object.entries(stacks)) {
      const k = Number(id);
      if (Number.isInteger(k) && k > 0 && !this.table.has(k)) this.table.set(k, frames.map(([file, line, name]) => ({ file, line, name })));
    }
    return this;
  }

  /** Take an attach's seed's stacks (torch's frames of the blocks from before the attach, where
   *  its memory history was on), under their ids in the model (SEED_STACK_BASE up). */
  addSeed(seed: Seed): this {
    for (const [id, frames] of Object.entries(seed.stacks ?? {})) {
      const k = SEED_STACK_BASE + Number(id);
      if (!this.table.has(k)) this.table.set(k, frames.map(([file, line, name]) => ({ file, line, name })));
    }
    return this;
  }

  stackOf(): number {
    return 0;
  }

  frames(stack: number): readonly Frame[] {
    return this.table.get(stack) ?? [];
  }

  userFrame(stack: number): number {
    let u = this.users.get(stack);
    if (u === undefined) {
      const frames = this.table.get(stack);
      if (!frames) return -1;
      this.users.set(stack, (u = userFrameIndex(frames, this.rule)));
    }
    return u;
  }
}

/** `stacks` with an attach's seed's stacks added, where it has any (a new table where none was). */
export function withSeedStacks(stacks: BlockStacks | null, seed: Seed | null): BlockStacks | null {
  if (!seed || Object.keys(seed.stacks ?? {}).length === 0) return stacks;
  if (stacks && !(stacks instanceof ManifestStacks)) return stacks; // a snapshot's: no seed comes with it
  return (stacks ?? new ManifestStacks()).addSeed(seed);
}

/** Whether a manifest's hook captured stacks (all allocations from a threshold up, smaller ones sampled). */
export function hasStacks(m: Pick<Manifest, "stack_min_bytes" | "stack_sample_bytes"> | null): boolean {
  return !!m && (m.stack_min_bytes > 0 || (m.stack_sample_bytes ?? 0) > 0);
}

/** The stacks of a manifest whose hook captured some, or null. */
export function manifestStacks(m: Manifest | null): ManifestStacks | null {
  return m && hasStacks(m) ? new ManifestStacks().update(m.stacks, m) : null;
}
