// What is outside PyTorch: a ledger of one process on one GPU that accounts for every byte NVML
// says the process uses (issue 40). NVML's per-process used is one figure; torch's allocator knows
// its own part (allocated, reserved, each private pool); the rest is the CUDA context, NCCL's
// communicators, other libraries (cuBLAS/cuDNN workspaces outside torch's allocator, Triton and
// compiled kernels, CuPy, TensorRT, a raw cudaMalloc) and whatever no one claimed.
//
// Two parts, both pure:
//   LedgerTrack  follows NVML − reserved across samples and ties each change to its cause: the
//                first sample is the context (where the program ran before it, attached into or
//                with steps done, the context and what libraries loaded by then, not told apart),
//                and where it came before torch's first allocation,
//                unmarked growth up to the first sample after that allocation is the context's
//                too (NVML lists a process while its context is being made: 22 MiB of a GPT-2
//                run's 610 MiB, 49 ms before its first cudaMalloc); a sample whose NVML and
//                reserved figures are not of one moment is never used (sameMoment); a change
//                while a library event's mark was open (the
//                agent's `gpumem:LIBRARY:EVENT` record_function ranges, agent/gpumem_agent/
//                libraries.py) is that library's; a change before the first step ends, with no
//                mark, is the context growing (kernels load lazily, on first use); any other
//                change is unexplained, and a large one is kept as a jump with the mark it followed.
//   ledgerRows   (src/system/ledger-rows.ts, where the document makes its rows) the rows at one
//                sample, from the same figures the document shows beside them: they sum exactly to
//                NVML's used, because `unexplained` is what is left (never hidden in another row,
//                negative where the claims overshoot).
import type { Jump, LedgerParts, LibraryPart } from "../system/ledger-rows";
export { ledgerRows, ledgerWords, libraryName, type Ledger, type LedgerParts, type LedgerRow, type LibraryPart, type Jump } from "../system/ledger-rows";

/** The prefix of the range names that are library marks (the agent's, or a program's own). */
export const LIBRARY_MARK_PREFIX = "gpumem:";

/** A change of unexplained memory at least this large is kept as a jump (a finding names it). */
export const JUMP_MIN_BYTES = 64 * 2 ** 20;
/** Unmarked growth counts as the context's only this long after the first sample (and before the
 *  first step ends): kernels load at their first use, early; an inference server's slow growth
 *  later, with no step ever ending, stays unexplained. */
export const CONTEXT_GROWTH_WINDOW_US = 120e6;
/** Jumps kept per process and device (the newest). */
const MAX_JUMPS = 8;
/** Library names kept per process and device: the marks name them, a program may mint many. */
const MAX_LIBRARIES = 32;

/** `gpumem:nccl:init_process_group` → { library: "nccl", event: "init_process_group" }; null for
 *  any other range name (the program's own ranges). */
export function libraryMark(name: string | null): { library: string; event: string } | null {
  if (name === null || !name.startsWith(LIBRARY_MARK_PREFIX)) return null;
  const rest = name.slice(LIBRARY_MARK_PREFIX.length);
  const i = rest.indexOf(":");
  const library = (i < 0 ? rest : rest.slice(0, i)).trim().slice(0, 40);
  const event = (i < 0 ? "" : rest.slice(i + 1)).trim().slice(0, 80);
  return library ? { library, event } : null;
}

/** NCCL events that make a communicator (the agent's names): a group's first collective, and an
 *  init_process_group or new_group given its device (eager: the communicator is made there). */
export function makesCommunicator(library: string, event: string): boolean {
  return library === "nccl" && (event.startsWith("first_collective") || event.endsWith(":eager"));
}

interface OpenEvent {
  library: string;
  event: string;
}

/** A library mark as the records carry it: the range entered or left, at `time_us`. */
export interface MarkRecord {
  time_us: number;
  name: string;
  enter: boolean;
}

/** One process's ledger over time on one device (fed by the model's marks and its NVML samples). */
export class LedgerTrack {
  private context: number | null = null;
  private contextBeforeAlloc = false;
  /** Whether the context's figure is whole: taken at (or grown to) a sample after torch's first
   *  allocation, which needs the context made; or the settling window passed. */
  private contextSettled = false;
  /** Unmarked growth from a first sample before torch's first allocation to the first after it. */
  private contextSettling = 0;
  /** Libraries whose marks came before the first sample: their memory is in the context's figure. */
  private contextIncludes: string[] = [];
  private contextGrowth = 0;
  /** Why the first sample's NVML − reserved holds more than the context, where it does: the process
   *  ran before the monitor saw it (attached into it, or steps done), so cuBLAS workspaces, kernels
   *  and whatever else loaded by then are in that figure and cannot be told apart. Null: not late. */
  private contextLate: { attached: boolean; steps: number } | null = null;
  /** The process was attached to (the agent started in it while it ran: `gpumem-tui attach`). */
  attached = false;
  private readonly libraries = new Map<string, LibraryPart>();
  private readonly jumps: Jump[] = [];
  private readonly jumpSteps: number[] = [];
  /** Marks not yet taken into a sample: those after the newest sample's time. */
  private pending: MarkRecord[] = [];
  /** Library events entered and not left, by name (a name entered twice counts once). */
  private readonly open = new Map<string, OpenEvent>();
  private prevOutside: number | null = null;
  private firstTime_us = 0;
  /** The newest mark taken (its name), for a jump's "after". */
  private lastMark: string | null = null;
  /** Samples taken (a test's and a view's count). */
  samples = 0;

  /** A library mark (any `gpumem:` range entered or left); others are not the ledger's. */
  mark(m: MarkRecord): void {
    if (libraryMark(m.name) === null) return;
    this.pending.push(m);
    if (this.pending.length > 4096) this.pending.splice(0, this.pending.length - 4096); // bounded: a program marking in a loop
  }

  /** NVML's used bytes of the process and torch's reserved at `time_us`; `step`: optimizer steps
   *  completed then, `where`: the loop's place in words ("step 3 (forward)") for a jump's cause.
   *  `sameMoment`: false where torch's reserved changed while NVML was read (the reader's figures
   *  on either side of the NVML read differ): NVML − reserved is then a difference of two moments,
   *  off by what torch reserved or freed between them, and the sample is not used. */
  sample(time_us: number, nvmlUsed: number, reserved: number, step: number, where: string, sameMoment = true): void {
    this.samples++;
    const outside = nvmlUsed - reserved;
    if (!sameMoment) return;
    // NVML's used holds torch's reserved and the context: below reserved, the two figures are not of
    // one moment (NVML read before the segments torch already counts were made: a recorded track's
    // sample a second old beside the replay's reserved, a tick's read racing the program). Nothing
    // is attributed from it, and the next consistent sample is compared with the last consistent
    // one: taken, it made an 18 GiB "jump" of the demo's first second (NVML 1.27 GiB at reserved
    // 18.46 GiB, then 19.18 GiB a second later).
    if (outside < 0) return;
    // The marks up to this sample: each entered event is active in this interval, left or not.
    const active = new Map<string, OpenEvent>(this.open);
    let taken = 0;
    let newest: OpenEvent | null = null;
    const libraries = new Set<string>();
    for (const m of this.pending) {
      if (m.time_us > time_us) break;
      taken++;
      const lm = libraryMark(m.name)!;
      const key = `${lm.library}:${lm.event}`;
      this.lastMark = m.name;
      if (m.enter) {
        this.open.set(key, lm);
        active.set(key, lm);
        newest = lm;
        libraries.add(lm.library);
        const p = this.part(lm.library);
        if (p) {
          p.events++;
          if (makesCommunicator(lm.library, lm.event)) p.communicators++;
          p.last_event = lm.event;
        }
      } else this.open.delete(key);
    }
    this.pending = this.pending.slice(taken);
    if (this.prevOutside === null) {
      this.context = outside;
      this.contextBeforeAlloc = reserved === 0;
      this.contextIncludes = [...libraries];
      this.contextSettled = reserved > 0;
      // Torch had allocated and the program had run before this first sample (an attach, or steps
      // done under a monitor started late): NVML − reserved is the context with every library that
      // loaded by then (an H200 GPT-2 attached after two steps: 742 MiB, its context alone 610).
      // Before torch's first allocation nothing of torch's had run, and the figure is the context's.
      if (reserved > 0 && (this.attached || step > 0)) this.contextLate = { attached: this.attached, steps: step };
      this.firstTime_us = time_us;
      this.prevOutside = outside;
      return;
    }
    const delta = outside - this.prevOutside;
    this.prevOutside = outside;
    // A first sample before torch's first allocation may have caught the context while it was
    // being made: until a sample after that allocation (torch allocates in a made context), or the
    // window's end, unmarked growth of any size is the context's, not a jump.
    const settling = !this.contextSettled && time_us - this.firstTime_us <= CONTEXT_GROWTH_WINDOW_US;
    if (!this.contextSettled && (reserved > 0 || !settling)) this.contextSettled = true;
    if (delta === 0) return;
    // The cause: the newest event entered in this interval, else one still open.
    const cause = newest ?? [...active.values()].pop() ?? null;
    if (cause !== null) {
      const p = this.part(cause.library);
      if (p) {
        p.bytes += delta;
        return;
      }
    }
    if (settling) {
      this.contextSettling += delta;
      return;
    }
    // Before the first step ends (and within CONTEXT_GROWTH_WINDOW_US), small unmarked growth is
    // the context's: kernels load on first use, a module at a time. A large one is not guessed at:
    // it stays unexplained, as a jump.
    // Not after a late first sample: an attach's steps count from 0, but its kernels loaded long before.
    if (step === 0 && this.contextLate === null && Math.abs(delta) < JUMP_MIN_BYTES && time_us - this.firstTime_us <= CONTEXT_GROWTH_WINDOW_US) {
      this.contextGrowth += delta;
      return;
    }
    if (Math.abs(delta) >= JUMP_MIN_BYTES) {
      this.jumps.push({ time_us, bytes: delta, after: this.lastMark ?? where });
      this.jumpSteps.push(step);
      if (this.jumps.length > MAX_JUMPS) this.jumps.shift(), this.jumpSteps.shift();
    }
  }

  private part(library: string): LibraryPart | null {
    let p = this.libraries.get(library);
    if (!p) {
      if (this.libraries.size >= MAX_LIBRARIES) return null; // what no row takes stays unexplained
      this.libraries.set(library, (p = { library, bytes: 0, events: 0, communicators: 0, last_event: "" }));
    }
    return p;
  }

  parts(): LedgerParts {
    return {
      context_bytes: this.context === null ? null : this.context + this.contextSettling,
      context_settling_bytes: this.contextSettling,
      context_before_first_allocation: this.contextBeforeAlloc,
      context_includes: [...this.contextIncludes],
      context_late: this.contextLate === null ? null : { ...this.contextLate },
      context_growth_bytes: this.contextGrowth,
      libraries: [...this.libraries.values()].map((p) => ({ ...p })),
      jumps: this.jumps.map((j) => ({ ...j })),
      jump_steps: [...this.jumpSteps],
    };
  }
}

/** Range marks kept per process for tracks not fed yet (a device's first NVML sample may come
 *  after the program's first library events). */
const MAX_RANGE_MARKS = 1024;

/** A process's ledgers, one track per device: the model hands it every range entered or left
 *  (names may come later than the records: the agent's manifest names them) and each NVML sample. */
export class ProcessLedger {
  private readonly tracks = new Map<number, LedgerTrack>();
  /** Ranges entered or left, newest last, each with its sequence number. */
  private readonly marks: Array<{ seq: number; time_us: number; range: number; enter: boolean }> = [];
  private seq = 0;
  /** Marks met so far (the monitor samples NVML again when it grows: collect/live.ts). */
  get marksSeen(): number {
    return this.seq;
  }
  /** Per device: the sequence number of the newest mark its track took. */
  private readonly taken = new Map<number, number>();
  /** The process was attached to (its manifest's `attached`): what it loaded before is unseen. */
  private attached = false;

  /** The agent was started in the running process (`gpumem-tui attach`): each device's first sample
   *  came after the program ran, so its context is not told apart from what loaded before. */
  setAttached(): void {
    this.attached = true;
    for (const t of this.tracks.values()) t.attached = true;
  }

  /** A range entered or left; `known`: its name where known now (a name that is not a library
   *  mark's is dropped here: the program's own ranges can be many a step). */
  range(time_us: number, range: number, enter: boolean, known: string | null): void {
    if (range === 0 || (known !== null && libraryMark(known) === null)) return;
    this.marks.push({ seq: ++this.seq, time_us, range, enter });
    // The newest MAX_RANGE_MARKS are read (sample); the older go a batch at a time: a shift() at
    // each mark moved every kept one (a program's own unnamed ranges come by the hundred a step).
    if (this.marks.length >= 2 * MAX_RANGE_MARKS) this.marks.splice(0, this.marks.length - MAX_RANGE_MARKS);
  }

  /** One NVML sample of the process on `device`: the marks since its track's last, then the sample
   *  (`sameMoment`: LedgerTrack.sample's). */
  sample(device: number, time_us: number, nvmlUsed: number, reserved: number, step: number, where: string, name: (range: number) => string | null, sameMoment = true): void {
    let t = this.tracks.get(device);
    if (!t) {
      this.tracks.set(device, (t = new LedgerTrack()));
      t.attached = this.attached;
    }
    const from = this.taken.get(device) ?? 0;
    for (let i = Math.max(0, this.marks.length - MAX_RANGE_MARKS); i < this.marks.length; i++) {
      const m = this.marks[i]!;
      if (m.seq <= from) continue;
      const n = name(m.range);
      if (n !== null) t.mark({ time_us: m.time_us, name: n, enter: m.enter });
    }
    this.taken.set(device, this.seq);
    t.sample(time_us, nvmlUsed, reserved, step, where, sameMoment);
  }

  /** The device's attribution so far; null before its first NVML sample. */
  parts(device: number): LedgerParts | null {
    return this.tracks.get(device)?.parts() ?? null;
  }
}
