// What the snapshot pickle reader (pickle.ts) gives and takes: the plain values it builds, the
// limits that bound a hostile file's cost, the hooks through which a caller takes trace entries out
// of the tree as they are read, the interface of the machine fed piece by piece, and the one error
// every bad input ends in. The parsing itself, opcode by opcode, is pickle.ts; this is its surface,
// which the rest of src/snapshot programs against (through pickle.ts, which re-exports it).

export class SnapshotError extends Error {
  override name = "SnapshotError";
}

export type PickleValue = null | boolean | number | string | Uint8Array | PickleValue[] | { [key: string]: PickleValue };

export interface PickleLimits {
  /** Objects created at most (strings, numbers and containers all count). */
  maxObjects: number;
  /** Items on the stack at most. */
  maxStack: number;
}

/** The limits a reader gets unless its caller gives others. */
export const DEFAULT_LIMITS: PickleLimits = { maxObjects: 50_000_000, maxStack: 10_000_000 };

/** Decides, for each item appended to a list, whether it leaves the tree. */
export interface PickleHooks {
  /** An item about to be appended to `list`: 0 keeps it there; n > 0 took it (and n objects with it). */
  take(item: PickleValue, list: PickleValue[]): number;
  /** What the memo keeps in place of an object a taken item held (a frames list other entries
   *  share: a small stand-in); undefined: nothing, and a later read of it is refused. */
  standIn(v: unknown): PickleValue | undefined;
  /** The memo has forgotten this batch's taken items: what the hook kept for standIn can go. */
  settled(): void;
  /** Called before the memo settles: the hook marks objects deeper inside this batch's taken items
   *  (a trace entry's frame dicts, inside its frames list) for the memo to forget too (forgotten;
   *  each then gets its standIn). Returns the objects they held, which leave with them. */
  forget?(): number;
  forgotten?(v: object): boolean;
}

/** A pickle reader fed piece by piece. */
export interface PickleMachine {
  /** The next bytes of the file; `last`: nothing follows. Returns the value once STOP is read. */
  feed(chunk: Uint8Array, last: boolean): PickleValue | undefined;
  /** Bytes read so far (where the next chunk starts, less what waits in a cut opcode). */
  readonly offset: number;
}
