// The profiler model of one process (one ring): events in, answers out. Pure: no I/O, no clock of
// its own (time comes with the events and with setNvml), so a recorded ring replays exactly like a
// live one. Views call the query functions (queries.ts, segments.ts, findings.ts); every output is
// a plain JSON-able object with units in the names.

import { PEAK_STEPS_KEPT } from "./at-peak";
import { ACTION, isMark, MAX_DEVICES, PHASE_NAMES, type EventBatch, type HookMode, type RingHeader, type DeviceTotals } from "../ffi/events";
import { DeviceState } from "./device";
import { LineTable } from "./lines";
import { liveLineSums } from "./line-bytes";
import { PhaseCallers } from "./phase-callers";
import type { BlockStacks } from "./user-frame";
import { byDevice, type Named, type NamedTensor } from "./name-blocks";

export type { NamedTensor } from "./name-blocks";
import { largestFreeBlock } from "./segment-map";
import type { Seed, SeedDevice, SeedStatus } from "./seed";
import { EventTail } from "./tail";
import { StepInputs } from "./inputs";
import { ProcessLedger } from "./ledger";
import type { RecordFields } from "../system/manifest";
import { DEFAULT_RULES, rulesOf, settingsOfAllocConf, type AllocatorRules } from "./block-sizes";

export interface SetHeaderOptions {
  /** Take the header's totals (default true). Replay of a recorded ring sets false until the end:
   *  a recorded header holds the final totals, which must not show at the start. */
  totals?: boolean;
  /** Every record of the ring has been read (a recording replayed to its end): a closed ring's
   *  header then holds torch's figures at the same point as the blocks, and they are compared. */
  streamEnd?: boolean;
}

/** Range ids index the model's per-range arrays: more distinct ranges than this is not a real run. */
const MAX_RANGE_ID = 1 << 16;

export class ProfilerModel {
  pid: number | null = null;
  mode: HookMode | null = null;
  closed = false;
  attach_unix_us: number | null = null;
  /** Exact totals from the ring header, by device (absent until setHeader). */
  readonly headerTotals = new Map<number, DeviceTotals>();
  /** Records lost (ring lapped) over the model's life. */
  lostRecords = 0;
  /** Lost records since the last header: the next header re-anchors the event-derived totals. */
  private lostSinceAnchor = 0;
  readonly rangeNames = new Map<number, string>();
  /** Each step's input shape and the allocator's limit (the agent's INPUT and LIMIT records). */
  readonly inputs = new StepInputs();
  /** What is outside PyTorch (ledger.ts): the library marks (`gpumem:` ranges) and NVML samples. */
  readonly ledger = new ProcessLedger();
  /** Devices by index; marks (device −1 or any) apply to all of them. */
  private readonly byIndex: (DeviceState | undefined)[] = new Array(MAX_DEVICES);
  readonly devices: DeviceState[] = [];
  // Where the process's training loop is, for devices that appear later.
  private step = 0;
  private phase = 0;
  private range = 0;
  eventsIngested = 0;
  /** The newest records as they came (null unless keepTrace): a snapshot's trace when the process keeps none. */
  tail: EventTail | null = null;
  /** Allocator records for a device outside 0..15 (skipped). */
  invalidRecords = 0;
  /** Sync records of devices that held nothing at the attach, by device: their counts' start. */
  private readonly emptyAtAttach = new Map<number, { t: number; events: number }>();
  /** By device: its last sync record lay at its point of the stream (its SYNC_PEAKS may be taken). */
  private readonly tiedSync: boolean[] = [];
  /** An attach's seed per device, until the device's records reach its point (seed.ts). */
  private seeds: Map<number, SeedDevice> | null = null;
  private seedTime_us = 0;
  /** What the ring's records carry beyond the events (the manifest says): see setRecordFields. */
  private fields = { segmentPools: false, allocStacks: false };
  /** How the allocator rounds and splits blocks (the manifest's `alloc_conf`; block-sizes.ts). */
  private rules: AllocatorRules = DEFAULT_RULES;
  private allocConf: string | null = null;
  /** What became of an attach's seed (null: the process was not attached, or has none). */
  seedStatus: SeedStatus | null = null;

  /** Feed events [start, end) of a batch (default: all of it). `lost`: records the reader lost before them. */
  ingest(batch: EventBatch, lost = 0, start = 0, end = batch.count): void {
    if (lost > 0) this.noteLost(lost);
    const time = batch.time_us;
    const action = batch.action;
    const device = batch.device;
    const phase = batch.phase;
    const address = batch.address;
    const size = batch.size;
    const stream = batch.stream;
    const stepCol = batch.step;
    const rangeCol = batch.range;
    const extra = batch.extra;
    const allocStacks = this.fields.allocStacks;
    const lineCol = batch.line;
    // where each allocator record's block size goes, for the kept records' views (EventTail.block)
    const blockOut = this.tail === null ? null : this.tail.blockSizesFor(batch);
    let lastDev = -1000;
    let d: DeviceState | undefined;
    // The current device's step, phase and range, in locals: most records match them.
    let cs = -1;
    let cp = -1;
    let cr = -1;
    for (let i = start; i < end; i++) {
      const a = action[i]!;
      const t = time[i]!;
      const st = stepCol[i]!;
      const ph = phase[i]!;
      let rg = rangeCol[i]!;
      if (rg >= MAX_RANGE_ID) {
        // The hook numbers ranges from 1 as it meets them: an id this large is a damaged record.
        this.invalidRecords++;
        rg = 0;
      }
      if (a === ACTION.sync) {
        // torch's own figures of one device at this point of the stream
        const dev = device[i]!;
        if (dev < 0 || dev >= MAX_DEVICES) this.invalidRecords++;
        // The attach's sync of a device that holds nothing yet: kept for when the device shows up
        // (a rank's neighbour GPU never does, and gets no empty state in the views).
        else if (this.byIndex[dev] || address[i]! !== 0 || size[i]! !== 0)
          this.tiedSync[dev] = this.deviceFor(dev, t, st, ph, rg).syncPoint(t, address[i]!, size[i]!, stream[i]!, extra[i]!) !== null;
        else this.emptyAtAttach.set(dev, { t, events: extra[i]! });
        continue;
      }
      if (a === ACTION.sync_peaks) {
        // torch's peaks and active beside the sync record before it (mark-every-hook rings): where
        // that sync lay at its point of the stream, an attached device learns its peaks from
        // before the attach (DeviceState.peaksFromTorch); otherwise known, not taken (the blocks'
        // figures are compared with them, tests/support/exact.ts)
        const dev = device[i]!;
        if (dev >= 0 && dev < MAX_DEVICES && this.tiedSync[dev] === true) {
          this.tiedSync[dev] = false;
          this.byIndex[dev]?.peaksFromTorch(address[i]!, size[i]!);
        }
        continue;
      }
      if (a === ACTION.input || a === ACTION.limit) {
        this.inputs.record(a, st, device[i]!, size[i]!, address[i]!, extra[i]!, t); // for the forecast (inputs.ts)
        continue;
      }
      if (isMark(a)) {
        // phase, step, range_enter, range_exit: marks for every device
        if (a === ACTION.range_enter || a === ACTION.range_exit) this.ledger.range(t, rg, a === ACTION.range_enter, this.rangeNames.get(rg) ?? null);
        if (a === ACTION.range_enter) this.mark(t, st, ph, this.enterRange(rg));
        else if (a === ACTION.range_exit) this.mark(t, st, ph, this.exitRange(rg));
        else if (a === ACTION.phase || a === ACTION.step) this.mark(t, st, ph, this.keepRange(rg));
        else this.invalidRecords++; // a mark this model does not know (a newer writer)
        // backward's and the optimizer's step's caller, where the hook put its stack (phase-callers.ts)
        if (a === ACTION.phase && extra[i]! !== 0 && allocStacks) this.callers.note(ph, extra[i]!);
        if (d !== undefined) {
          cs = d.step;
          cp = d.phase;
          cr = d.range;
        }
        continue;
      }
      const dev = device[i]!;
      if (dev !== lastDev) {
        if (dev < 0 || dev >= MAX_DEVICES) {
          // Not a record our writers make: count it, keep going (a view says so; nothing is lost silently).
          this.invalidRecords++;
          continue;
        }
        d = this.deviceFor(dev, t, st, ph, rg);
        lastDev = dev;
        cs = d.step;
        cp = d.phase;
        cr = d.range;
      }
      const ds = d!;
      // A record stamped with an older step was stamped just before a mark from another thread
      // (allocator and agent write concurrently): it belongs to the step the marks say.
      if ((st !== cs || ph !== cp || rg !== cr) && st >= cs) {
        ds.sync(t, st, ph, rg);
        this.step = st;
        this.phase = ph;
        this.range = rg;
        cs = st;
        cp = ph;
        cr = rg;
      }
      if (a <= ACTION.free_completed || a === ACTION.free) {
        // The allocator's records, this one and those after it that the same stamps cover, in one
        // run (DeviceState.allocatorRecords); `i` moves to the run's last record, after which a
        // line it is stamped with is recorded. An attach's seed goes in right after its device's
        // counted record of its point: while one waits, a run is one record.
        const seeding = this.seeds !== null;
        ds.blockOut = blockOut;
        i = ds.allocatorRecords(batch, i, end, cs, cp, cr, MAX_RANGE_ID, allocStacks, seeding) - 1;
        this.eventsIngested += ds.foldedFrees; // a folded free is two events, as the writer recorded them
        if (seeding && a !== ACTION.free_completed) this.seedDue(ds, t);
      } else {
        switch (a) {
          case ACTION.segment_alloc: // `extra`: the segment's pool, where the hook carries it
            ds.segmentAlloc(t, address[i]!, size[i]!, stream[i]!, true, extra[i]!);
            break;
          case ACTION.segment_free:
            ds.segmentFree(t, address[i]!, size[i]!, true);
            break;
          case ACTION.segment_map:
            ds.segmentAlloc(t, address[i]!, size[i]!, stream[i]!, false, extra[i]!);
            break;
          case ACTION.segment_unmap:
            ds.segmentFree(t, address[i]!, size[i]!, false);
            break;
          case ACTION.oom:
            // The failed request's stack: a snapshot's frames, or the hook's in the record's address.
            ds.oom(t, size[i]!, extra[i]!, largestFreeBlock, batch.stack[i]! || (allocStacks ? address[i]! : 0), this.liveLines);
            break;
          case ACTION.snapshot: // nothing to account
            ds.touch(t);
            break;
          default: // an allocator action this model does not know (a newer writer): counted, not guessed at
            ds.touch(t);
            this.invalidRecords++;
        }
      }
      const ln = lineCol[i]!;
      if (ln !== 0) this.lines.record(ln, dev, action[i]!, size[i]!, ds.active, ds.reserved);
    }
    this.eventsIngested += end - start;
    if (this.tail) this.tail.push(batch, start, end);
  }

  /** Keep the last `entries` records for snapshots written from the model (snapshot/from-model.ts). */
  keepTrace(entries?: number): this {
    this.tail = new EventTail(entries);
    return this;
  }

  /** How many finished steps' blocks at their peak and end each device keeps (at-peak.ts). */
  private peakSteps = PEAK_STEPS_KEPT;

  /** Keep the blocks of the last `steps` finished steps (a replay: as many as its step records). */
  keepPeaks(steps: number): this {
    this.peakSteps = steps;
    for (const d of this.devices) d.peaks.keep = steps;
    return this;
  }

  // The record_function ranges open, innermost last. A range_exit record names the range it left
  // (gpumem_ring.h); the range current after it is the one below on this stack.
  private rangeStack: number[] = [];

  /** The range each range was first entered from (0: at top level), for inclusive range figures. */
  readonly rangeParent = new Map<number, number>();

  private enterRange(id: number): number {
    if (this.rangeStack.length >= 256) this.rangeStack.shift(); // exits were lost: keep it bounded
    if (!this.rangeParent.has(id)) {
      const parent = this.rangeStack.length ? this.rangeStack[this.rangeStack.length - 1]! : 0;
      if (parent !== id) this.rangeParent.set(id, parent);
    }
    this.rangeStack.push(id);
    return id;
  }

  private exitRange(id: number): number {
    const at = this.rangeStack.lastIndexOf(id);
    if (at >= 0) this.rangeStack.splice(at, 1);
    return this.rangeStack.length ? this.rangeStack[this.rangeStack.length - 1]! : 0;
  }

  /** Phase and step marks carry the current range: no range open means the stack is empty. */
  private keepRange(id: number): number {
    if (id === 0) this.rangeStack.length = 0;
    return id;
  }

  /** A mark from the agent (phase, step, range): the loop's state for every device. */
  private mark(t: number, step: number, phase: number, range: number): void {
    this.step = step;
    this.phase = phase;
    this.range = range;
    for (const d of this.devices) {
      if (d.fresh) d.begin(t);
      if (step !== d.step || phase !== d.phase || range !== d.range) d.sync(t, step, phase, range);
    }
  }

  /** The device's state, created on first use (throws for an index outside 0..15). A new device
   *  starts where its first record says the loop is (or where the marks say, without a record). */
  deviceFor(dev: number, t: number, step = this.step, phase = this.phase, range = this.range): DeviceState {
    if (dev < 0 || dev >= MAX_DEVICES) throw new RangeError(`event for device ${dev}: devices are 0..${MAX_DEVICES - 1}`);
    let d = this.byIndex[dev];
    if (!d) {
      d = new DeviceState(dev, step, phase, range);
      d.peaks.keep = this.peakSteps;
      d.poolsInRecords = this.fields.segmentPools;
      d.setRules(this.rules);
      this.byIndex[dev] = d;
      this.devices.push(d);
      this.devices.sort((x, y) => x.device - y.device);
      // Records lost before this device's first one may have been its own: its detail is partial.
      if (this.lostRecords > 0) d.noteLost(this.lostRecords);
      const h = this.headerTotals.get(dev);
      if (h && this.lostRecords > 0) d.anchor(h.allocated, h.reserved, h.active);
      const attach = this.emptyAtAttach.get(dev);
      if (attach) d.syncPoint(attach.t, 0, 0, 0, attach.events);
    }
    if (d.fresh) d.begin(t);
    return d;
  }

  /** The device's state, or undefined when no event for it arrived yet. */
  device(dev: number): DeviceState | undefined {
    return dev >= 0 && dev < MAX_DEVICES ? this.byIndex[dev] : undefined;
  }

  /**
   * An attach's seed (seed.ts): each device's part is applied once that device's alloc and
   * free_requested records reach its `events`, at once where they already have. Refused, with
   * the reason in seedStatus, where records were lost or the reader already passed the point:
   * detail then stays partial for its named cause, as without a seed.
   */
  setSeed(seed: Seed): void {
    this.seedTime_us = seed.unix_ns / 1000;
    this.seedStatus = { state: "pending", reason: null, blocks: 0, bytes: 0, kept: 0 };
    if (this.lostRecords > 0) return this.refuseSeed("records were lost before its point");
    this.seeds = new Map(seed.devices.map((d) => [d.device, d]));
    for (const part of seed.devices) {
      const d = this.byIndex[part.device] ?? (part.events === 0 ? this.deviceFor(part.device, this.seedTime_us) : undefined);
      if (d) this.seedDue(d, Number.isFinite(d.lastTime_us) ? d.lastTime_us : this.seedTime_us);
    }
  }

  private seedDue(d: DeviceState, t: number): void {
    const part = this.seeds?.get(d.device);
    if (part === undefined) return;
    const events = d.nAlloc + d.nFree;
    if (events < part.events) return;
    if (events > part.events) return this.refuseSeed(`the reader had passed its point on device ${d.device}`);
    const r = d.seed(part.segments, t);
    // torch's peaks read with the seed (a newer agent's): known at once, not at the next sync point
    if (part.peak_allocated !== undefined) d.peaksFromTorch(part.peak_allocated, part.peak_reserved ?? 0);
    const st = this.seedStatus!;
    st.blocks += r.added;
    st.bytes += r.addedBytes;
    st.kept += r.kept;
    this.seeds!.delete(d.device);
    if (this.seeds!.size === 0) {
      this.seeds = null;
      if (st.state === "pending") st.state = "applied";
    }
  }

  private refuseSeed(reason: string): void {
    this.seeds = null;
    if (this.seedStatus) Object.assign(this.seedStatus, { state: "refused", reason });
  }

  /** Records lost by the reader (the ring lapped): block detail becomes partial. */
  noteLost(n: number): void {
    if (this.seeds !== null) this.refuseSeed("records were lost before its point");
    this.tail?.noteLost();
    this.lostRecords += n;
    this.lostSinceAnchor += n;
    for (const d of this.devices) d.noteLost(n);
  }

  /** The ring header's state: pid, mode, exact totals. After lost records its totals re-anchor the model's. */
  setHeader(h: RingHeader, opts: SetHeaderOptions = {}): void {
    this.pid = h.pid;
    this.mode = h.mode;
    this.closed = h.closed;
    this.attach_unix_us = h.attach_unix_us;
    if (opts.totals === false) return;
    for (const t of h.totals) this.headerTotals.set(t.device, t);
    if (this.lostSinceAnchor > 0) {
      for (const t of h.totals) {
        const d = this.byIndex[t.device];
        if (d) d.anchor(t.allocated, t.reserved, t.active);
      }
      this.lostSinceAnchor = 0;
    }
    // A ring left open (its process killed) holds the live totals of its last moment, between two
    // of the agent's copies: only a closed ring's, or one written before sync records existed
    // (its writer saved exact totals), is taken for torch's figures at the end.
    if (opts.streamEnd && h.mode === "hook")
      for (const t of h.totals) {
        const d = this.byIndex[t.device];
        if (d && (h.closed || d.consistency.before === null)) d.endPoint(t.allocated, t.reserved, t.requested);
      }
  }

  /** torch's peaks were reset in the process (reset_peaks, the `r` key): the model's too, so the
   *  one peak shown stays torch's. Records the monitor has not read yet were before the reset and
   *  may raise it again by what they hold: the agent's next sync shows any such gap. */
  resetPeaks(): void {
    for (const d of this.devices) d.resetPeaks();
  }

  /** NVML's used bytes for this process on a device, sampled at nowUs (the caller joins pids).
   *  `sameMoment`: false where torch's reserved changed across the NVML read (the ledger leaves
   *  such a sample out: LedgerTrack.sample). */
  setNvml(pid: number, device: number, usedBytes: number, nowUs: number, sameMoment = true): void {
    if (!Number.isFinite(usedBytes) || usedBytes < 0) throw new RangeError(`NVML used bytes must be a non-negative number, got ${usedBytes}`);
    const d = this.deviceFor(device, nowUs);
    d.nvml(pid, usedBytes, nowUs);
    const reserved = this.headerTotals.get(device)?.reserved ?? d.reserved;
    this.ledger.sample(device, nowUs, usedBytes, reserved, d.step, `step ${d.step} (${PHASE_NAMES[d.phase] ?? "other"})`, (r) => this.rangeNames.get(r) ?? null, sameMoment);
  }

  /** The line profiler's line names (manifest `lines`: id → "file.py:42: code"). */
  readonly lineNames = new Map<number, string>();
  /** What the records stamped with a line did, by line (lines.ts). */
  readonly lines = new LineTable();
  /** Where the live blocks were allocated (a snapshot's stacks; null where none were recorded):
   *  findings name the user's line from it (user-frame.ts). */
  stacks: BlockStacks | null = null;
  /** Where backward and the optimizer's step were called from (the phase marks' stacks). */
  readonly callers = new PhaseCallers();
  /** Whether a ring's alloc records carry their stack id in `extra` (the manifest's stacks). */
  get recordStacks(): boolean {
    return this.fields.allocStacks;
  }
  /** The live blocks of a device by stack (an OOM's lines holding most), made once: not per record. */
  private readonly liveLines = (d: DeviceState) => liveLineSums(this, d);

  setLines(lines: Record<string, string>): void {
    for (const [id, name] of Object.entries(lines)) {
      const n = Number(id);
      if (Number.isInteger(n) && n > 0) this.lineNames.set(n, String(name));
    }
  }

  /** What the records carry (the manifest's `segment_pools`, `stack_min_bytes`): each segment's pool
   *  (devices tell private pools apart), and an alloc's Python stack id in `extra` (model.stacks);
   *  and the allocator's settings (`alloc_conf`), by which each block gets torch's size. */
  setRecordFields(f: RecordFields): void {
    this.fields = { segmentPools: f.segmentPools ?? false, allocStacks: f.allocStacks ?? false };
    for (const d of this.devices) d.poolsInRecords = this.fields.segmentPools;
    // read again only when it changes: a live session passes the manifest at every tick
    const conf = f.allocConf ?? null;
    if (conf !== this.allocConf) {
      this.allocConf = conf;
      this.rules = rulesOf(settingsOfAllocConf(conf), false);
      for (const d of this.devices) d.setRules(this.rules);
    }
  }

  /** Range ids → names (the manifest's `ranges`). */
  setRanges(ranges: Record<string, string> | Map<number, string>): void {
    const entries = ranges instanceof Map ? [...ranges.entries()] : Object.entries(ranges);
    for (const [id, name] of entries) {
      const n = Number(id);
      if (!Number.isInteger(n) || n < 0) throw new RangeError(`range id must be a non-negative integer, got ${JSON.stringify(id)}`);
      this.rangeNames.set(n, String(name));
    }
  }

  /** A range entered whose name the manifest did not hold yet (the agent writes new names a
   *  moment after the hook numbers them). */
  hasUnnamedRange(): boolean {
    for (const id of this.rangeParent.keys()) if (!this.rangeNames.has(id)) return true;
    return false;
  }

  rangeName(id: number): string | null {
    if (id === 0) return null;
    return this.rangeNames.get(id) ?? `range#${id}`;
  }

  /**
   * The agent's tensor names: each tensor's block (the block holding its address) takes its name
   * and category. Where records were lost, a named tensor the model has no block for is added,
   * so block detail resynchronizes. Returns how many tensors matched a block and how many were added.
   */
  setNames(tensors: NamedTensor[]): Named {
    let matched = 0;
    let added = 0;
    let unknown = 0;
    for (const [dev, list] of byDevice(tensors)) {
      const d = this.byIndex[dev];
      if (!d) {
        unknown += list.length;
        continue;
      }
      const r = d.applyNames(list);
      matched += r.matched;
      added += r.added;
      unknown += r.unknown;
    }
    return { matched, added, unknown };
  }
}

export function createModel(): ProfilerModel {
  return new ProfilerModel();
}
