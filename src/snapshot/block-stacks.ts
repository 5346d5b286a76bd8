// Where a snapshot's blocks were allocated, for the screens and the JSON alike: a block's stack as
// its frames in the final segments say (the same context as its alloc entry in the trace), its
// user frame (profiler/user-frame.ts), and the words for both. The snapshot's rule for what is
// library code comes from the environment (GPUMEM_TUI_LIBRARY, GPUMEM_TUI_USER_CODE).

import { DEFAULT_USER_FRAME_RULE, frameKind, frameLabel, groupByUserFrame, parseRuleEntries, type BlockStacks, type Frame, type UserFrameRule } from "../profiler/user-frame";
import type { PickleValue } from "./pickle";
import type { StackTable } from "./stack-table";

/** The frames a top allocation of the JSON lists at most (its user frame is named whatever its depth). */
export const JSON_FRAMES = 32;

export const LIBRARY_ENV = "GPUMEM_TUI_LIBRARY";
export const USER_CODE_ENV = "GPUMEM_TUI_USER_CODE";

/** The rule from the environment: extra library code, and code that is the user's wherever it lies
 *  (each a list of path prefixes or module names, separated by ":" or ","). Throws a sentence on a
 *  bad entry. */
export function userFrameRuleFromEnv(env: Record<string, string | undefined> = process.env): UserFrameRule {
  const library = env[LIBRARY_ENV] ? parseRuleEntries(env[LIBRARY_ENV]!, LIBRARY_ENV) : [];
  const user = env[USER_CODE_ENV] ? parseRuleEntries(env[USER_CODE_ENV]!, USER_CODE_ENV) : [];
  return library.length || user.length ? { library, user } : DEFAULT_USER_FRAME_RULE;
}

type Obj = { [k: string]: PickleValue };
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);

/** A table's stacks as BlockStacks, with each stack's frames kept once they are asked for. */
class TableStacks implements BlockStacks {
  private readonly byDevice = new Map<number, Map<number, number>>();
  private readonly framesOf = new Map<number, readonly Frame[]>();
  private readonly users = new Map<number, number>();

  constructor(
    private readonly table: StackTable,
    private readonly rule: UserFrameRule,
  ) {}

  set(device: number, address: number, stack: number): void {
    (this.byDevice.get(device) ?? this.byDevice.set(device, new Map()).get(device)!).set(address, stack);
  }

  stackOf(device: number, address: number): number {
    return this.byDevice.get(device)?.get(address) ?? 0;
  }

  frames(stack: number): readonly Frame[] {
    let f = this.framesOf.get(stack);
    if (f === undefined) this.framesOf.set(stack, (f = this.table.frames(stack)));
    return f;
  }

  userFrame(stack: number): number {
    let u = this.users.get(stack);
    if (u === undefined) this.users.set(stack, (u = this.table.userFrame(stack, this.rule)));
    return u;
  }
}

/** Every active block of the snapshot's segments (allocated, or freed but still in use by a
 *  stream) with the stack its frames name. */
export function snapshotStacks(root: { [key: string]: PickleValue }, table: StackTable, rule: UserFrameRule = DEFAULT_USER_FRAME_RULE): BlockStacks {
  const out = new TableStacks(table, rule);
  for (const seg of Array.isArray(root.segments) ? root.segments : []) {
    if (!isObj(seg)) continue;
    const device = typeof seg.device === "number" ? seg.device : 0;
    for (const b of Array.isArray(seg.blocks) ? seg.blocks : []) {
      if (!isObj(b) || (b.state !== "active_allocated" && b.state !== "active_pending_free") || typeof b.address !== "number") continue;
      const stack = table.of(b.frames);
      if (stack !== 0) out.set(device, b.address, stack);
    }
  }
  // The segments' frame dicts stay in the tree: nothing is to forget.
  table.takeFresh();
  table.takeFresh();
  return out;
}

/** The user frame of a stack in words ("train.py:42 step"; `short`: the file's name only), or null
 *  where it has none (no frames, or library code only). */
export function userFrameLabel(stacks: BlockStacks, stack: number, short = false): string | null {
  const k = stacks.userFrame(stack);
  return k < 0 ? null : frameLabel(stacks.frames(stack)[k]!, short);
}

/** What a top allocation of the JSON says of where it was allocated. */
export interface AllocatedAt {
  /** "file:line function", innermost first, at most JSON_FRAMES of them; native (C/C++) frames
   *  left out where the stack has Python ones (stacks="all" puts dozens before them). */
  frames: string[];
  /** Frames the stack has in all, native ones included. */
  frames_total: number;
  /** The first frame outside library code, or null (no frames, or library code only). */
  user_frame: string | null;
  /** Its place in `frames`, or null (none, or past the ones listed). */
  user_frame_index: number | null;
}

/** Where a block with `stack` was allocated, for the JSON (one object per stack, shared). */
export function allocatedAt(stacks: BlockStacks, stack: number, memo: Map<number, AllocatedAt>): AllocatedAt {
  let a = memo.get(stack);
  if (a) return a;
  const all = stacks.frames(stack);
  const python = all.filter((f) => frameKind(f.file) !== "native");
  const listed = (python.length > 0 ? python : all).slice(0, JSON_FRAMES);
  const k = stacks.userFrame(stack);
  const at = k < 0 ? -1 : listed.indexOf(all[k]!);
  a = { frames: listed.map((f) => frameLabel(f)), frames_total: all.length, user_frame: k < 0 ? null : frameLabel(all[k]!), user_frame_index: at < 0 ? null : at };
  memo.set(stack, a);
  return a;
}

/** The JSON's grouping: per device, allocated bytes and blocks by user frame, the most bytes first
 *  (at most `limit` groups a device; `user_frame` null: blocks with none). */
export function byUserFrameJson<T extends { device: number; size_bytes: number; user_frame: string | null }>(live: readonly T[], limit = 50) {
  const devices = [...new Set(live.map((t) => t.device))].sort((a, b) => a - b);
  return devices.flatMap((device) =>
    groupByUserFrame(
      live.filter((t) => t.device === device),
      (t) => t.user_frame,
      (t) => t.size_bytes,
    )
      .slice(0, limit)
      .map((g) => ({ device, user_frame: g.label, blocks: g.items.length, bytes: g.bytes })),
  );
}
