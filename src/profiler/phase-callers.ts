// Where the program calls backward and the optimizer's step: the hook records the calling thread's
// stack on the agent's backward and optimizer phase marks (the record's `extra`, where stacks are
// on), since the gradients themselves are allocated by autograd's engine, whose threads have no
// Python frames. Counted per stack; the finding about kept gradients cites the most frequent.

import { PHASE } from "../ffi/events";

/** Distinct caller stacks kept per phase (a loop calls from one or two places). */
const MAX_CALLERS = 64;

export class PhaseCallers {
  private readonly byPhase = new Map<number, Map<number, number>>();

  /** A phase mark of `phase` that carries `stack` (not 0). */
  note(phase: number, stack: number): void {
    if (phase !== PHASE.backward && phase !== PHASE.optimizer) return;
    let m = this.byPhase.get(phase);
    if (!m) this.byPhase.set(phase, (m = new Map()));
    const n = m.get(stack);
    if (n !== undefined) m.set(stack, n + 1);
    else if (m.size < MAX_CALLERS) m.set(stack, 1);
  }

  /** The stacks that entered `phase`, the most frequent first. */
  of(phase: number): number[] {
    const m = this.byPhase.get(phase);
    return m ? [...m.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([s]) => s) : [];
  }
}
