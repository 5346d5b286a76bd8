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
  /** The bytes of the file maxObjects was set for (objectLimits), said when it is passed. */
  fileBytes?: number;
}

/** The limits a reader gets unless its caller gives others. The stack: Python's pickler writes
 *  lists and dicts in batches of 1,000 items, and no snapshot in test/fixtures (nor a generated
 *  one of 64 MiB, nor one of 200,000 blocks) stacks 3,000 items; 10 million MARKs cost 280 MB. */
export const DEFAULT_LIMITS: PickleLimits = { maxObjects: 50_000_000, maxStack: 1_000_000 };

/**
 * Objects a file may build for each of its bytes on disk (compressed, for a gzip file), past
 * OBJECTS_FLOOR. The objects a reader holds at once (the tree, the memo, a batch of trace entries)
 * peak at 0.5 to 1.5 a compressed byte in test/fixtures/snapshots, 0.004 in a generated 64 MiB
 * trace, 5.4 in 200,000 alike blocks one after the other (the most regular layout a real
 * allocator gives); a gzip'd file that memoizes empty dicts builds 344 a byte (20 million from
 * 58 KB, 1.66 GB held). A memoized empty dict holds some 90 bytes, so a file may cost ~3 KB of
 * memory a byte on disk (a plain pickle builds at most one object a byte anyway).
 */
export const OBJECTS_PER_BYTE = 32;
/** Any file may build this many (a small snapshot's ratio says little): ~90 MB at most. */
export const OBJECTS_FLOOR = 1_000_000;

/** The limits for a file of `fileBytes` bytes on disk. */
export function objectLimits(fileBytes: number): PickleLimits {
  const maxObjects = Math.min(DEFAULT_LIMITS.maxObjects, Math.max(OBJECTS_FLOOR, OBJECTS_PER_BYTE * fileBytes));
  return { ...DEFAULT_LIMITS, maxObjects, fileBytes };
}

/** The words for a file that builds more than its limit. */
export function tooManyObjects(limits: PickleLimits): string {
  if (limits.fileBytes === undefined) return `more than ${limits.maxObjects} objects`;
  return `the snapshot builds more than ${limits.maxObjects} objects from its ${limits.fileBytes} bytes (${OBJECTS_PER_BYTE} a byte, ${OBJECTS_FLOOR} for a small file, at most): refused as hostile or corrupt`;
}

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
  /** Objects the reader holds now (made or pushed, less those a take hook took). */
  readonly objects: number;
}
