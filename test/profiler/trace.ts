// Builds event batches for the model's unit tests: specific allocator sequences, written the way
// the hook and the agent write them (every record stamped with the loop's step, phase and range).
// Recorded rings from the GPU test the model end to end (fixtures.test.ts); these test its rules.
import { ACTION, newEventBatch, type EventBatch } from "../../src/ffi/events";

export const FWD = 1;
export const BWD = 2;
export const OPT = 3;
export const OTHER = 0;

type Row = [number, number, number, number, number, number, number, number, number, number];

export class Trace {
  rows: Row[] = [];
  t = 1_000_000;
  step = 0;
  phase = 0;
  range = 0;
  device = 0;
  private ranges: number[] = [];
  dt = 10;

  private push(action: number, address = 0, size = 0, extra = 0, stream = 7): this {
    this.t += this.dt;
    this.rows.push([this.t, action, this.device, this.phase, address, size, stream, extra, this.step, this.range]);
    return this;
  }
  alloc(address: number, size: number): this {
    return this.push(ACTION.alloc, address, size);
  }
  free(address: number, size: number): this {
    this.push(ACTION.free_requested, address, size);
    return this.push(ACTION.free_completed, address, size);
  }
  segment(address: number, size: number): this {
    return this.push(ACTION.segment_alloc, address, size);
  }
  segmentFree(address: number, size: number): this {
    return this.push(ACTION.segment_free, address, size);
  }
  oom(request: number, deviceFree: number): this {
    return this.push(ACTION.oom, 0, request, deviceFree);
  }
  /** A sync record as the hook writes it: torch's allocated, reserved and requested bytes, and the
   *  alloc + free_requested records it had counted (SYNC_UNSURE when an event raced the read). */
  sync(allocated: number, reserved: number, requested: number, events: number): this {
    this.t += this.dt;
    this.rows.push([this.t, ACTION.sync, this.device, this.phase, allocated, reserved, requested, events, this.step, this.range]);
    return this;
  }
  /** The SYNC_PEAKS record the hook writes right after a sync at a hook (GPUMEM_TUI_MARKS=hooks):
   *  torch's peak allocated, peak reserved and active from the same reading; `point` where. */
  syncPeaks(peakAllocated: number, peakReserved: number, active: number, point = 1): this {
    this.t += this.dt;
    this.rows.push([this.t, ACTION.sync_peaks, this.device, this.phase, peakAllocated, peakReserved, active, point, this.step, this.range]);
    return this;
  }
  setPhase(p: number): this {
    this.phase = p;
    return this.push(ACTION.phase);
  }
  nextStep(): this {
    this.step++;
    this.phase = OTHER;
    return this.push(ACTION.step);
  }
  /** As the hook writes them: enter and exit records name their range; others carry the innermost. */
  enter(range: number): this {
    this.ranges.push(range);
    this.range = range;
    return this.push(ACTION.range_enter);
  }
  exit(): this {
    const left = this.ranges.pop() ?? 0;
    this.range = left;
    this.push(ACTION.range_exit);
    this.range = this.ranges.at(-1) ?? 0;
    return this;
  }
  wait(us: number): this {
    this.t += us;
    return this;
  }
  batch(from = 0, to = this.rows.length): EventBatch {
    const b = newEventBatch(Math.max(1, to - from));
    for (let k = from; k < to; k++) {
      const [t, a, d, p, addr, size, stream, extra, step, range] = this.rows[k]!;
      const i = k - from;
      b.time_us[i] = t;
      b.action[i] = a;
      b.device[i] = d;
      b.phase[i] = p;
      b.address[i] = addr;
      b.size[i] = size;
      b.stream[i] = stream;
      b.extra[i] = extra;
      b.step[i] = step;
      b.range[i] = range;
    }
    b.count = to - from;
    return b;
  }
}

export const MiB = 1024 * 1024;

/**
 * One training step of a small model: params P (allocated once, outside), a batch, forward saving
 * activations, backward freeing them and making gradients, optimizer creating state on the first
 * step. `zeroGrad` frees gradients before forward (zero_grad(set_to_none=True)); `keep` leaks
 * `keep` bytes allocated in forward every step (a loss kept with its graph).
 */
export function trainingStep(
  tr: Trace,
  opts: { zeroGrad?: boolean; keep?: number; firstStep?: boolean; grads?: boolean } = {},
): void {
  const s = tr.step;
  const zeroGrad = opts.zeroGrad ?? true;
  const base = 0x1000_0000 + s * 0x10_0000;
  // zero_grad: the last step's gradients go (set_to_none)
  if (zeroGrad && s > 0) {
    tr.free(0x2000_0000, 4 * MiB);
    tr.free(0x2040_0000, 4 * MiB);
  }
  tr.alloc(base, 1 * MiB); // input batch
  tr.setPhase(FWD);
  tr.enter(1);
  tr.alloc(base + 0x1_0000, 8 * MiB); // activation
  tr.alloc(base + 0x2_0000, 2 * MiB); // temporary
  tr.free(base + 0x2_0000, 2 * MiB);
  tr.exit();
  tr.alloc(base + 0x3_0000, 8 * MiB); // activation
  if (opts.keep) tr.alloc(base + 0x4_0000, opts.keep); // loss kept with its graph
  tr.setPhase(BWD);
  const gradsNeeded = zeroGrad || s === 0;
  if (gradsNeeded) tr.alloc(0x2000_0000, 4 * MiB); // gradient
  else {
    tr.alloc(base + 0x5_0000, 4 * MiB); // computed gradient, added into the kept one
    tr.free(base + 0x5_0000, 4 * MiB);
  }
  tr.free(base + 0x3_0000, 8 * MiB);
  tr.alloc(base + 0x6_0000, 3 * MiB); // backward temporary
  tr.free(base + 0x6_0000, 3 * MiB);
  if (gradsNeeded) tr.alloc(0x2040_0000, 4 * MiB);
  tr.free(base + 0x1_0000, 8 * MiB);
  tr.setPhase(OPT);
  if (opts.firstStep) tr.alloc(0x3000_0000, 8 * MiB); // optimizer state
  tr.alloc(base + 0x7_0000, 1 * MiB); // optimizer temporary
  tr.free(base + 0x7_0000, 1 * MiB);
  tr.free(base, 1 * MiB); // the input batch goes
  tr.nextStep();
}
