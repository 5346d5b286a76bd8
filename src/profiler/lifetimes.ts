// Category inference for the blocks the agent has not named: by lifetime (what a block outlives
// says what it is, see categories.ts survivorCategory), by what was alive before the first forward
// (parameters), and by names carried from the same tensor in an earlier step. It decides at phase
// and step boundaries; per allocator event it only notes the new block.

import { FROM_NAMES, type BlockTable, type TensorInfo } from "./blocks";
import { CAT_ACTIVATION, CAT_GRADIENT, CAT_INPUT, CAT_OPTIMIZER_STATE, CAT_OTHER, CAT_PARAMETER, CAT_UNRESOLVED, survivorCategory } from "./categories";
import { PHASE } from "../ffi/events";
import { ParamSizes } from "./param-sizes";

/** What a phase's end decided: the category its survivors took, and the bytes on each side. */
export interface PhaseVerdict {
  promoted: number;
  /** Bytes that took `promoted`. */
  bytes: number;
  /** Bytes of backward that outlived it without a parameter of their size: caches, not gradients. */
  otherBytes: number;
}

export class Lifetimes {
  /** Counts category changes: part of the device's version, a key for the queries' caches. */
  changes = 0;
  // Blocks allocated in the running phase instance, resolved when it ends. Entries are (slot,
  // serial) so a slot freed and reused meanwhile is told apart. A run of allocator records
  // appends to them in its loop (DeviceState.allocatorRecords, after pendRoom).
  pendSlot = new Int32Array(1024);
  pendSerial = new Float64Array(1024);
  pendLen = 0;
  private firstForwardSerial = -1;
  private firstForwardStep = -1;
  /** Sizes of the blocks alive when the first forward began (the parameters among them): a block
   *  that outlives backward is a gradient when it fits a parameter's size (param-sizes.ts). */
  private readonly paramSizes = new ParamSizes();
  /** Sizes of the blocks that became gradients or optimizer state (by lifetime or by name): every
   *  trained parameter has blocks of its size made for it in backward and in the optimizer step,
   *  an input batch has none (promoteParameters tells the two apart by them). */
  private readonly trainedSizes = new ParamSizes();
  private boundariesSinceFirstForward = 0;
  /**
   * Names the agent gave, by address: a tensor freed and made again each step (a gradient under
   * zero_grad(set_to_none=True)) comes back at the same address with the same size, and its new
   * block takes the name once its lifetime gives it the same category (see carryName).
   */
  private readonly nameMemory = new Map<number, { name: string; size: number; cat: number; info: TensorInfo }>();

  constructor(private readonly blocks: BlockTable) {}

  /** Room for `n` more pending blocks without the arrays growing: a run of allocator records
   *  appends its allocs (each pending until its phase ends: its category is known then). */
  pendRoom(n: number): void {
    if (this.pendSlot.length - this.pendLen < n) this.growPending(n);
  }

  /** A forward phase begins (`serial`: the last block allocated before it). The first one counts. */
  forward(serial: number, step: number): void {
    if (this.firstForwardSerial >= 0) return;
    this.firstForwardSerial = serial;
    this.firstForwardStep = step;
    const b = this.blocks;
    for (const slot of b.bySlot.values()) this.paramSizes.add(b.size[slot]!);
  }

  /** The running phase instance (`phase`) ends and `next` begins: its surviving blocks get their
   *  category. Outside any module's forward but right before backward is where the loss is
   *  computed: what it keeps for backward is activation too. */
  endPhase(phase: number, next: number): PhaseVerdict {
    const promoted = phase === PHASE.other && next === PHASE.backward ? CAT_ACTIVATION : survivorCategory(phase);
    const backward = promoted === CAT_GRADIENT;
    const b = this.blocks;
    const cat = b.category;
    let bytes = 0;
    let n = 0;
    let otherBytes = 0;
    let otherN = 0;
    for (let k = 0; k < this.pendLen; k++) {
      const slot = this.pendSlot[k]!;
      if (b.serial[slot] === this.pendSerial[k] && cat[slot] === CAT_UNRESOLVED) {
        if (backward && this.paramSizes.size > 0 && !this.paramSizes.fits(b.size[slot]!)) {
          cat[slot] = CAT_OTHER;
          otherBytes += b.size[slot]!;
          otherN++;
        } else {
          cat[slot] = promoted;
          bytes += b.size[slot]!;
          n++;
          if (promoted === CAT_GRADIENT || promoted === CAT_OPTIMIZER_STATE) this.trainedSizes.add(b.size[slot]!);
        }
        if (this.nameMemory.size > 0) this.carryName(slot);
      }
    }
    this.pendLen = 0;
    this.changes++;
    b.moveSums(CAT_UNRESOLVED, promoted, bytes, n);
    b.moveSums(CAT_UNRESOLVED, CAT_OTHER, otherBytes, otherN);
    return { promoted, bytes, otherBytes };
  }

  /** A step boundary: the second after the first forward settles the parameters. */
  stepBoundary(): void {
    if (this.firstForwardSerial >= 0 && ++this.boundariesSinceFirstForward === 2) this.promoteParameters();
  }

  /** Give a live block the agent's category (cat < 0: a name only, the lifetime category stays). */
  name(slot: number, cat: number, name: string | undefined, info?: TensorInfo): void {
    this.changes++;
    const b = this.blocks;
    if (name !== undefined) {
      b.names[slot] = name;
      if (info) b.tensors[slot] = info;
      if (cat >= 0 && this.nameMemory.size < 1 << 16)
        this.nameMemory.set(b.address[slot]!, { name, size: b.size[slot]!, cat, info: { ...(info ?? { shape: null, dtype: null }), carried: true } });
    }
    if (cat < 0) return;
    if (cat === CAT_GRADIENT || cat === CAT_OPTIMIZER_STATE) this.trainedSizes.add(b.size[slot]!);
    b.recategorize(slot, cat);
    b.flags[slot] = FROM_NAMES;
  }

  /** A block whose lifetime category matches a tensor named at its address and size before. */
  private carryName(slot: number): void {
    const b = this.blocks;
    if (b.names[slot] !== undefined) return;
    const known = this.nameMemory.get(b.address[slot]!);
    if (known && known.size === b.size[slot] && known.cat === b.category[slot]) {
      b.names[slot] = known.name;
      b.tensors[slot] = known.info;
    }
  }

  /**
   * Two steps after the first forward: blocks allocated before it (outside any phase) and still
   * alive are the model's parameters and buffers, or an input batch made once before the loop
   * (splitParameters tells them apart). And "activations" of that first step that no later step
   * freed are caches made on first use (the cuBLAS workspace of the forward's thread, for one),
   * not activations: they become other.
   */
  private promoteParameters(): void {
    this.changes++;
    const b = this.blocks;
    let parameters = 0;
    const before: number[] = [];
    for (const slot of b.bySlot.values()) {
      const cat = b.category[slot]!;
      if (b.flags[slot] !== 0) {
        // Parameters the agent named count as parameters seen: their sizes are in paramSizes.
        if (cat === CAT_PARAMETER) parameters++;
        continue;
      }
      if (cat === CAT_OTHER && b.serial[slot]! <= this.firstForwardSerial) before.push(slot);
      else if (cat === CAT_ACTIVATION && b.step[slot] === this.firstForwardStep) b.recategorize(slot, CAT_OTHER);
    }
    parameters += this.splitParameters(before);
    if (parameters > 0) return;
    // No parameter was allocated while the model watched (it attached after the model was built):
    // sizes cannot tell gradients from caches, so what outlived backward is taken for gradients.
    this.paramSizes.clear();
    for (const slot of b.bySlot.values())
      if (b.flags[slot] === 0 && b.category[slot] === CAT_OTHER && b.phase[slot] === PHASE.backward) b.recategorize(slot, CAT_GRADIENT);
  }

  /**
   * Blocks made before the first forward and alive through every step since: parameters, except
   * those no gradient or optimizer state was ever sized as that were made after the last block
   * that was (the model is moved to the GPU before its data: an input batch made once before the
   * loop). A frozen parameter has neither either, but is made with the model, before the last
   * trained one. With no gradient or optimizer state seen (inference), all are parameters.
   * Returns how many became parameters.
   */
  private splitParameters(slots: number[]): number {
    const b = this.blocks;
    const trained = this.trainedSizes;
    let lastTrained = -1;
    if (trained.size > 0) for (const slot of slots) if (trained.fits(b.size[slot]!)) lastTrained = Math.max(lastTrained, b.serial[slot]!);
    let parameters = 0;
    for (const slot of slots) {
      const parameter = trained.size === 0 || b.serial[slot]! <= lastTrained;
      b.recategorize(slot, parameter ? CAT_PARAMETER : CAT_INPUT);
      if (parameter) parameters++;
    }
    return parameters;
  }

  private growPending(need = 1): void {
    // Compact first: entries whose block is gone or already resolved need not stay.
    const b = this.blocks;
    let w = 0;
    for (let k = 0; k < this.pendLen; k++) {
      const slot = this.pendSlot[k]!;
      if (b.serial[slot] === this.pendSerial[k] && b.category[slot] === CAT_UNRESOLVED) {
        this.pendSlot[w] = slot;
        this.pendSerial[w++] = this.pendSerial[k]!;
      }
    }
    this.pendLen = w;
    // room for `need` more and as many again as were kept: the next compaction is at least as
    // many entries away as this one went over (a run asks for its room at every start)
    if (this.pendSlot.length - w >= need + w) return;
    let n = this.pendSlot.length * 2;
    while (n - w < need + w) n *= 2;
    const s = new Int32Array(n);
    s.set(this.pendSlot);
    const r = new Float64Array(n);
    r.set(this.pendSerial);
    this.pendSlot = s;
    this.pendSerial = r;
  }
}
