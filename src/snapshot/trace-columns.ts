// A snapshot's trace (`device_traces`) as typed columns, filled entry by entry while the pickle is
// read: an entry dict is read once into numbers and dropped, so a trace of millions of entries
// costs 40 bytes an entry instead of a tree of objects. Its frames become a stack id (each distinct
// stack kept once: stack-table.ts) and the phase hint that stack gives (frames.ts).

import { ACTION } from "../ffi/events";
import { StackTable } from "./stack-table";
import { SnapshotError, type PickleValue } from "./pickle";
import { badBytes, bytesRefusal } from "./segments-check";

/** PyTorch's trace actions (TraceEntry::Action) → the model's action codes. */
export const TRACE_ACTIONS: Record<string, number> = {
  alloc: ACTION.alloc,
  free_requested: ACTION.free_requested,
  free_completed: ACTION.free_completed,
  segment_alloc: ACTION.segment_alloc,
  segment_free: ACTION.segment_free,
  segment_map: ACTION.segment_map,
  segment_unmap: ACTION.segment_unmap,
  snapshot: ACTION.snapshot,
  oom: ACTION.oom,
};

const num = (v: unknown, what: string, where: () => string): number => {
  if (v === undefined || v === null) return 0;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new SnapshotError(`${where()}: ${what} must be a non-negative number, got ${JSON.stringify(v)}`);
  return v;
};

/** An entry's address or size: a whole number of bytes under 2^53 (segments-check.ts says why). */
const bytes = (v: unknown, what: string, where: () => string): number => {
  const n = num(v, what, where);
  if (badBytes(n) !== null) throw new SnapshotError(`${where()}: ${bytesRefusal(what, n)}`);
  return n;
};

/** Entries a trace may hold (torch's `max_entries` is set by the user; 2^28 is far past any). */
const MAX_ENTRIES = 2 ** 28;

export class TraceColumns {
  count = 0;
  action: Uint8Array;
  /** While reading: the list the entry came from; after `assignDevices`: its device. */
  device: Uint16Array;
  hint: Uint8Array;
  /** The entry's stack (its frames) in `stacks`; 0: none. */
  stack: Uint32Array;
  /** Every distinct frame and stack of the trace, once (and of the segments' blocks, once asked). */
  readonly stacks = new StackTable();
  address: Float64Array;
  size: Float64Array;
  stream: Float64Array;
  /** NaN where the entry has no time_us (its predecessor's time stands in at replay). */
  time_us: Float64Array;
  /** oom entries: bytes free on the device, by entry index. */
  readonly deviceFree = new Map<number, number>();
  private readonly lists = new Map<unknown, number>();
  /** The frames lists of the entries taken since the memo last forgot them, with their stacks. */
  private readonly recentFrames = new Map<unknown, number>();

  /** Columns grow in place (resizable buffers): a trace of millions of entries is never copied. */
  private readonly buffers: ArrayBuffer[] = [];

  constructor() {
    const column = <T>(make: (b: ArrayBuffer) => T, bytes: number): T => {
      const b = new ArrayBuffer(1024 * bytes, { maxByteLength: MAX_ENTRIES * bytes });
      this.buffers.push(b);
      return make(b);
    };
    this.action = column((b) => new Uint8Array(b), 1);
    this.device = column((b) => new Uint16Array(b), 2);
    this.hint = column((b) => new Uint8Array(b), 1);
    this.stack = column((b) => new Uint32Array(b), 4);
    this.address = column((b) => new Float64Array(b), 8);
    this.size = column((b) => new Float64Array(b), 8);
    this.stream = column((b) => new Float64Array(b), 8);
    this.time_us = column((b) => new Float64Array(b), 8);
  }

  /** A pickle take hook: a dict with an `action` string is a trace entry; anything else stays in the tree. */
  take(item: PickleValue, list: PickleValue[]): number {
    if (item === null || typeof item !== "object" || Array.isArray(item) || item instanceof Uint8Array) return 0;
    const e = item as Record<string, PickleValue>;
    if (typeof e.action !== "string") return 0;
    let id = this.lists.get(list);
    if (id === undefined) {
      id = this.lists.size;
      if (id > 0xfffe) throw new SnapshotError("trace entries in more than 65,534 lists: not a snapshot's device_traces");
      this.lists.set(list, id);
    }
    const entry = this.count; // (add counts it before its checks can fail)
    this.add(e, id, () => `trace entry ${entry} (${e.action})`);
    if (Array.isArray(e.frames)) this.recentFrames.set(e.frames, this.stack[this.count - 1]!);
    // The objects it made leave with it: itself, its keys and values, its frames list's items.
    let objects = 1;
    for (const k in e) objects += 2;
    return objects + (Array.isArray(e.frames) ? e.frames.length : 0);
  }

  /** A pickle hook: a taken entry's frames list becomes its stack's stand-in (frames.ts), the entry
   *  itself nothing (no file names an entry twice); anything else it held stays as it is. */
  standIn(v: unknown): PickleValue | undefined {
    const h = this.recentFrames.get(v);
    if (h !== undefined) {
      this.recentFrames.delete(v);
      return this.stacks.ref(h) as unknown as PickleValue;
    }
    const frame = this.stacks.frameStandIn(v);
    if (frame !== undefined) return frame as unknown as PickleValue;
    const entry = v !== null && typeof v === "object" && typeof (v as { action?: unknown }).action === "string";
    return entry ? undefined : (v as PickleValue);
  }

  settled(): void {
    this.recentFrames.clear();
  }

  /** Pickle hooks: the frame dicts first read in this batch are forgotten too (stack-table.ts). */
  forget(): number {
    return this.stacks.takeFresh();
  }
  forgotten(v: object): boolean {
    return this.stacks.isFresh(v);
  }

  /** One entry of `device_traces[list]`. */
  add(e: Record<string, unknown>, list: number, where: () => string): void {
    const code = TRACE_ACTIONS[e.action as string];
    if (code === undefined) throw new SnapshotError(`${where()}: unknown action ${JSON.stringify(e.action)} (known: ${Object.keys(TRACE_ACTIONS).join(", ")})`);
    if (this.count === this.action.length) this.grow();
    const i = this.count++;
    this.action[i] = code;
    this.device[i] = list;
    this.address[i] = bytes(e.addr, "addr", where);
    this.size[i] = bytes(e.size, "size", where);
    this.stream[i] = typeof e.stream === "number" ? e.stream : 0;
    this.time_us[i] = e.time_us === undefined || e.time_us === null ? NaN : num(e.time_us, "time_us", where);
    const stack = this.stacks.of(e.frames);
    this.stack[i] = stack;
    this.hint[i] = this.stacks.hint(stack);
    if (code === ACTION.oom) this.deviceFree.set(i, num(e.device_free, "device_free", where));
  }

  /** After the file: each list's place in `device_traces` is its device. */
  assignDevices(deviceTraces: unknown): void {
    if (this.count === 0) return;
    if (!Array.isArray(deviceTraces)) throw new SnapshotError("trace entries but no `device_traces` list");
    const device = new Map<number, number>();
    deviceTraces.forEach((l, d) => {
      const id = this.lists.get(l);
      if (id !== undefined) device.set(id, d);
    });
    for (let i = 0; i < this.count; i++) {
      const d = device.get(this.device[i]!);
      if (d === undefined) throw new SnapshotError(`trace entry ${i} lies outside device_traces`);
      if (d > 127) throw new SnapshotError(`device_traces[${d}]: device index above 127`);
      this.device[i] = d;
    }
    this.lists.clear();
  }

  /** The devices with entries, in order. */
  devices(): number[] {
    const seen = new Set<number>();
    for (let i = 0; i < this.count; i++) seen.add(this.device[i]!);
    return [...seen].sort((a, b) => a - b);
  }

  private grow(): void {
    // 1.25× and in place: the typed arrays track their buffers' length.
    const old = this.action.length;
    const n = Math.min(MAX_ENTRIES, Math.ceil(old * 1.25));
    if (n <= this.count) throw new SnapshotError(`more than ${MAX_ENTRIES} trace entries`);
    for (const b of this.buffers) b.resize((b.byteLength / old) * n);
  }
}

/** A snapshot already parsed into plain objects (JSON fixtures, `torch.cuda.memory._snapshot()` as JSON). */
export function columnsOf(deviceTraces: unknown): TraceColumns {
  if (!Array.isArray(deviceTraces)) throw new SnapshotError("not a PyTorch memory snapshot: no device_traces list (was it recorded with torch.cuda.memory._record_memory_history()?)");
  const c = new TraceColumns();
  deviceTraces.forEach((list, d) => {
    if (!Array.isArray(list)) throw new SnapshotError(`device_traces[${d}] must be a list of trace entries`);
    if (list.length > 0 && d > 127) throw new SnapshotError(`device_traces[${d}]: device index above 127`);
    list.forEach((e, k) => {
      const where = () => `device_traces[${d}][${k}]`;
      if (!e || typeof e !== "object" || typeof e.action !== "string") throw new SnapshotError(`${where()}: an entry needs an action string`);
      c.add(e, d, where);
    });
  });
  return c;
}
