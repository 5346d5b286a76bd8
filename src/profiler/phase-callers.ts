// Where the program calls backward and the optimizer's step: the hook records the calling thread's
// stack on the agent's backward and optimizer phase marks (the record's `extra`, where stacks are
// on), since the gradients themselves are allocated by autograd's engine, whose threads have no
// Python frames. Counted per stack; the finding about kept gradients cites the most frequent.

import { ACTION, PHASE } from "../ffi/events";
import type { EventTail } from "./tail";
import { frameLabel, type BlockStacks } from "./user-frame";

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

/**
 * Where the kept records say a phase was called from, where no mark carried a stack (a snapshot's
 * trace: torch's history has no marks of ours; a ring whose hook did not capture on marks): the
 * user's line most allocations of that phase with a stack name, among the model's kept records.
 * Backward's own first allocation (the loss's gradient, made on the calling thread) names the line
 * that called it; the optimizer's state and temporaries the line of its step. Null where none does.
 * `m`: the model, by what is read of it (the model keeps the callers: it is not imported back).
 */
export function tailCaller(m: { readonly tail: EventTail | null; readonly stacks: BlockStacks | null; readonly recordStacks: boolean }, phase: number): string | null {
  const t = m.tail;
  const stacks = m.stacks;
  if (!t || !stacks) return null;
  const count = new Map<string, number>();
  const labels = new Map<number, string | null>();
  const first = Math.max(t.validFrom, t.total - t.capacity);
  for (let r = first; r < t.total; r++) {
    const k = r % t.capacity;
    if (t.action[k] !== ACTION.alloc || t.phase[k] !== phase) continue;
    const stack = t.stack[k]! || (m.recordStacks ? t.extra[k]! : 0);
    if (!stack) continue;
    let label = labels.get(stack);
    if (label === undefined) {
      const u = stacks.userFrame(stack);
      labels.set(stack, (label = u < 0 ? null : frameLabel(stacks.frames(stack)[u]!)));
    }
    if (label) count.set(label, (count.get(label) ?? 0) + 1);
  }
  let top: [string, number] | null = null;
  for (const e of count) if (!top || e[1] > top[1] || (e[1] === top[1] && e[0] < top[0])) top = e;
  return top ? top[0] : null;
}
