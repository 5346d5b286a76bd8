// The categories of live memory, in the same words as the agent's `names` verb (docs/protocol.md).
// Codes index the model's typed arrays; names are what every view prints.

import { PHASE } from "../ffi/events";

export const CATEGORIES = [
  "other",
  "parameter",
  "gradient",
  "optimizer_state",
  "activation",
  "temporary",
  "buffer",
  // Where no name came: alive across steps, made outside forward, backward and the optimizer,
  // and not sized as any parameter's gradient or optimizer state (the batch a program feeds).
  "input",
] as const;
export type CategoryName = (typeof CATEGORIES)[number];

export const CAT_OTHER = 0;
export const CAT_PARAMETER = 1;
export const CAT_GRADIENT = 2;
export const CAT_OPTIMIZER_STATE = 3;
export const CAT_ACTIVATION = 4;
export const CAT_TEMPORARY = 5;
export const CAT_BUFFER = 6;
export const CAT_INPUT = 7;
/** Allocated in the phase that is still running: its category is known when the phase ends. */
export const CAT_UNRESOLVED = 8;
/** Number of counters a device keeps (the named categories plus "unresolved"). */
export const N_CAT = 9;

const CODE_BY_NAME = new Map<string, number>(CATEGORIES.map((name, code) => [name, code]));

/** The category code of a name from the agent, or -1 for a word the model does not know. */
export function categoryCode(name: string): number {
  return CODE_BY_NAME.get(name) ?? -1;
}

/**
 * What a block allocated in `phase` becomes when it outlives that phase (the lifetime rule that
 * approximates PyTorch's memory profiler where the agent has no name for the tensor):
 * alive past forward → activation, past backward → gradient, past the optimizer → optimizer state.
 * A block freed within its phase is a temporary.
 */
export function survivorCategory(phase: number): number {
  switch (phase) {
    case PHASE.forward:
      return CAT_ACTIVATION;
    case PHASE.backward:
      return CAT_GRADIENT;
    case PHASE.optimizer:
      return CAT_OPTIMIZER_STATE;
    default:
      return CAT_OTHER;
  }
}
