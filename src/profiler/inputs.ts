// What each step was fed and the allocator's own limit, from the agent's INPUT and LIMIT records
// (written by the agent's inputs module, laid out in the ring header): the batch forecast
// (forecast.ts) scales a step's activations with its input's shape and caps its answer at the limit.

import { ACTION } from "../ffi/events";

/** The outermost module's first tensor argument at a step's first forward. */
export interface StepInput {
  step: number;
  device: number;
  /** Its first dimension. */
  batch: number;
  /** Its second (0 for a tensor of one dimension). */
  seq: number;
  elements: number;
  t_us: number;
}

/** Steps whose input is kept: far more than the per-step figures the forecast reads. */
export const INPUT_STEPS_KEPT = 4096;

export class StepInputs {
  private readonly byStep = new Map<number, StepInput>();
  /** The allocator's limit by device, in bytes (torch.cuda.set_per_process_memory_fraction); 0 none. */
  readonly limits = new Map<number, number>();
  /** Records whose figures no writer makes (a dimension or device out of range): counted, not kept. */
  invalid = 0;
  /** Changes whenever an input or a limit is kept: a key for the forecast's cache (forecast.ts). */
  version = 0;

  /** An INPUT or LIMIT record's fields as the ring carries them. */
  record(action: number, step: number, device: number, size: number, address: number, extra: number, t_us: number): void {
    if (device < 0 || !Number.isSafeInteger(size) || !Number.isSafeInteger(address)) {
      this.invalid++;
      return;
    }
    if (action === ACTION.limit) {
      this.limits.set(device, size);
      this.version++;
      return;
    }
    if (this.byStep.has(step)) return; // the step's first forward says it (micro-batches repeat it)
    this.version++;
    this.byStep.set(step, { step, device, batch: size, seq: address, elements: Number.isSafeInteger(extra) ? extra : 0, t_us });
    if (this.byStep.size > INPUT_STEPS_KEPT) this.byStep.delete(this.byStep.keys().next().value!);
  }

  /** Step `step`'s input, where the agent said it. */
  at(step: number): StepInput | undefined {
    return this.byStep.get(step);
  }

  /** How many steps' inputs are known. */
  get size(): number {
    return this.byStep.size;
  }

  /** The latest step's input, or null. */
  latest(): StepInput | null {
    let last: StepInput | null = null;
    for (const v of this.byStep.values()) if (last === null || v.step >= last.step) last = v;
    return last;
  }
}
