// What a trace entry's stack frames say about the phase it was allocated in. A snapshot has no
// phase marks, but its frames name the code that allocated: autograd's backward (its engine, a
// generated Backward node, AccumulateGrad, torch/autograd/), an optimizer's step, a module's
// forward, or the module's `.to()` / `.cuda()` that made the parameters. Phases use the model's
// codes (1 forward, 2 backward, 3 optimizer), so the model's lifetime rule gives the categories:
// what outlives a forward is an activation, a backward a gradient, an optimizer step its state.
// The frames themselves are kept once per distinct stack (stack-table.ts).

/** Frames present, none decisive (the user's own code, a data loader). */
export const HINT_NONE = 0;
export const HINT_FORWARD = 1;
export const HINT_BACKWARD = 2;
export const HINT_OPTIMIZER = 3;
/** A module moved to the GPU (`Module._apply`): parameters and buffers, outside any phase. */
export const HINT_SETUP = 4;
/** No frames at all: autograd's engine thread runs no Python (stacks="python"), or no stacks were recorded. */
export const HINT_NO_FRAMES = 5;

/** One frame's verdict; precedence in an entry: backward > optimizer > setup > forward. */
export function classify(filename: string, name: string): number {
  const f = filename.replaceAll("\\", "/");
  if (f.includes("torch/autograd/") || (f.endsWith("torch/_tensor.py") && name === "backward")) return HINT_BACKWARD;
  if (name.includes("torch::autograd::Engine") || name.includes("autograd::generated::") || /Backward\d*::apply|AccumulateGrad/.test(name)) return HINT_BACKWARD;
  if (f.includes("torch/optim/") || name.startsWith("Optimizer.step")) return HINT_OPTIMIZER;
  if (f.endsWith("torch/nn/modules/module.py")) {
    if (name === "_apply" || name === "convert" || name === "to" || name === "cuda" || name === "to_empty") return HINT_SETUP;
    if (name === "_call_impl" || name === "_wrapped_call_impl" || name === "forward") return HINT_FORWARD;
    return HINT_NONE;
  }
  if (f.includes("torch/nn/modules/") || f.endsWith("torch/nn/functional.py") || name === "forward") return HINT_FORWARD;
  return HINT_NONE;
}

/** What a reader of hints sees of a frames list that was read already: its hint. */
export class FramesHint {
  constructor(readonly hint: number) {}
}

/**
 * What stays of a frames list once its entry is read: its stack's id (stack-table.ts) and hint.
 * PyTorch shares one frames list between entries of one context (an alloc's free_requested and
 * free_completed, a block in the segments), so a later entry may name it again; one stand-in per
 * distinct stack, however many lists named it.
 */
export class StackRef extends FramesHint {
  constructor(
    hint: number,
    readonly stack: number,
  ) {
    super(hint);
  }
}

const RANK = [0, 1, 4, 3, 2]; // by hint code: none, forward, backward, optimizer, setup

/** The hint of a stack from its frames' own verdicts (classify), by the same precedence. */
export function strongerHint(best: number, h: number): number {
  return RANK[h]! > RANK[best]! ? h : best;
}

/** Hints by file and function name: a long run repeats the same few hundred frames millions of times. */
export class FrameHints {
  private readonly byFile = new Map<string, Map<string, number>>();

  /** The phase hint of one entry's frames (innermost first, as PyTorch lists them). */
  of(frames: unknown): number {
    if (frames instanceof FramesHint) return frames.hint;
    if (!Array.isArray(frames) || frames.length === 0) return HINT_NO_FRAMES;
    let best = HINT_NONE;
    for (const fr of frames) {
      if (fr === null || typeof fr !== "object") continue;
      const { filename, name } = fr as { filename?: unknown; name?: unknown };
      const file = typeof filename === "string" ? filename : "";
      const fn = typeof name === "string" ? name : "";
      let names = this.byFile.get(file);
      if (names === undefined) this.byFile.set(file, (names = new Map()));
      let h = names.get(fn);
      if (h === undefined) names.set(fn, (h = classify(file, fn)));
      if (RANK[h]! > RANK[best]!) {
        best = h;
        if (h === HINT_BACKWARD) return h;
      }
    }
    return best;
  }
}
