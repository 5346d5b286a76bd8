// A PyTorch memory snapshot as `_record_memory_history(stacks="python")` from a program's first
// line would record it, written without a GPU: the program of issue 36 (a Sequential of 8 residual
// blocks LayerNorm(512) → Linear(512, 2048) → GELU → Linear(2048, 512), then Linear(512, 1000);
// AdamW; an input batch made once before the loop; record_function ranges "## forward ##",
// "## backward ##", "## optimizer ##"; four steps, with or without zero_grad). What the allocator
// sees, in its order: the parameters at the model's `.cuda()` line, the input, each forward's
// activations (cuBLAS's workspace on the first matmul, kept), each backward's blocks with no frames
// (autograd's engine thread runs no Python; its own cuBLAS workspace on its first matmul, kept),
// the gradients (made in the first backward; without zero_grad later backwards add into them
// through a parameter-sized temporary), AdamW's state in the first optimizer step.
// Every block gets its own addresses (no reuse): the categories do not depend on the layout.

import { Tuple, type PickleData } from "../../src/snapshot/pickle-write";

const MiB = 1 << 20;
const SMALL = MiB;
const SEGMENT_SMALL = 2 * MiB;
const roundUp = (n: number, to: number) => Math.ceil(n / to) * to;

/** The program's source lines, as the frames name them. */
export const PROGRAM = "/home/user/train.py";
export const LINES = { model: 20, input: 22, target: 23, forward: 27, loss: 28, backward: 30, optimizer: 32, zeroGrad: 33, blockForward: 12 } as const;

type Frame = { filename: string; name: string; line: number };
const TORCH = "/usr/lib/python3/site-packages/torch";
const user = (line: number, name = "<module>"): Frame => ({ filename: PROGRAM, name, line });
const SETUP: Frame[] = [
  { filename: `${TORCH}/nn/modules/module.py`, name: "<lambda>", line: 1100 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "_apply", line: 930 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "_apply", line: 903 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "cuda", line: 1100 },
  user(LINES.model),
];
const forwardFrames = (op: string): Frame[] => [
  { filename: `${TORCH}/nn/modules/${op === "linear" ? "linear" : op === "gelu" ? "activation" : "normalization"}.py`, name: "forward", line: 125 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "_call_impl", line: 1784 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "_wrapped_call_impl", line: 1773 },
  user(LINES.blockForward, "forward"),
  { filename: `${TORCH}/nn/modules/module.py`, name: "_call_impl", line: 1784 },
  { filename: `${TORCH}/nn/modules/module.py`, name: "_wrapped_call_impl", line: 1773 },
  user(LINES.forward),
];
const LOSS: Frame[] = [{ filename: `${TORCH}/nn/functional.py`, name: "cross_entropy", line: 3494 }, user(LINES.loss)];
const OPTIM: Frame[] = [
  { filename: `${TORCH}/optim/adamw.py`, name: "_init_group", line: 120 },
  { filename: `${TORCH}/optim/optimizer.py`, name: "wrapper", line: 517 },
  user(LINES.optimizer),
];
const OPTIM_TEMP: Frame[] = [{ filename: `${TORCH}/optim/adam.py`, name: "_multi_tensor_adam", line: 700 }, ...OPTIM.slice(1)];

export interface Program {
  zeroGrad: boolean;
  steps?: number;
  /** Record frames at all (stacks="python"); false: a snapshot recorded with no stacks. */
  frames?: boolean;
}

/** What the program holds at the end, for the tests to assert against (bytes are block sizes). */
export interface ProgramFacts {
  parameters: { blocks: number; bytes: number };
  gradients: { blocks: number; bytes: number };
  optimizer_state: { blocks: number; bytes: number };
  input: { blocks: number; bytes: number };
  /** cuBLAS's workspaces (one per thread that ran a matmul): made on first use, kept. */
  workspaces: { blocks: number; bytes: number };
  memory_allocated: number;
}

interface Block {
  address: number;
  size: number;
  request: number;
  segment: number;
  frames: Frame[];
  live: boolean;
}

/** The parameters' requests in the order `.cuda()` makes them (fp32). */
export function parameterSizes(): number[] {
  const out: number[] = [];
  for (let b = 0; b < 8; b++) out.push(512 * 4, 512 * 4, 2048 * 512 * 4, 2048 * 4, 512 * 2048 * 4, 512 * 4);
  out.push(1000 * 512 * 4, 1000 * 4);
  return out;
}

export function trainingSnapshot(p: Program): { snapshot: PickleData; facts: ProgramFacts } {
  const steps = p.steps ?? 4;
  const withFrames = p.frames !== false;
  const trace: PickleData[] = [];
  const annotations: PickleData[] = [];
  const segments: { address: number; size: number; blocks: Block[] }[] = [];
  let t = 1_700_000_000_000_000;
  let next = 0x7f0000000000;
  let small: { address: number; size: number; blocks: Block[]; used: number } | null = null;
  const tick = () => (t += 3);
  const entry = (action: string, address: number, size: number, frames: Frame[]) =>
    trace.push({ action, addr: address, size, stream: 0, time_us: tick(), frames: withFrames ? frames : [] });

  const newSegment = (size: number, frames: Frame[]) => {
    const s = { address: next, size, blocks: [] as Block[], used: 0 };
    next += size + 2 * MiB;
    segments.push(s);
    entry("segment_alloc", s.address, size, frames);
    return s;
  };
  const alloc = (request: number, frames: Frame[]): Block => {
    const rounded = roundUp(Math.max(request, 1), 512);
    let b: Block;
    if (rounded <= SMALL) {
      if (small === null || small.used + rounded > small.size) small = newSegment(SEGMENT_SMALL, frames);
      b = { address: small.address + small.used, size: rounded, request, segment: small.address, frames, live: true };
      small.used += rounded;
      small.blocks.push(b);
    } else {
      // A large request in a fresh segment of its size rounded to 2 MiB: the allocator keeps the
      // block whole (what would remain is 1 MiB or less), so the block is the segment.
      const s = newSegment(roundUp(rounded, 2 * MiB), frames);
      b = { address: s.address, size: s.size, request, segment: s.address, frames, live: true };
      s.blocks.push(b);
    }
    entry("alloc", b.address, request, frames);
    return b;
  };
  const free = (b: Block) => {
    b.live = false;
    entry("free_requested", b.address, b.request, b.frames);
    entry("free_completed", b.address, b.request, b.frames);
  };
  const range = (name: string, body: () => void) => {
    annotations.push({ stage: "START", name, device: 0, time_us: tick() });
    body();
    annotations.push({ stage: "END", name, device: 0, time_us: tick() });
  };

  // model = nn.Sequential(...).cuda()
  const params = parameterSizes().map((n) => alloc(n, SETUP));
  // x = torch.randn(64, 64, 512, device="cuda"); y = torch.randint(0, 1000, (64, 64), device="cuda")
  const x = alloc(64 * 64 * 512 * 4, [user(LINES.input)]);
  const y = alloc(64 * 64 * 8, [user(LINES.target)]);
  const rows = 64 * 64;
  let grads: Block[] | null = null;
  let state: Block[] = [];
  const workspaces: Block[] = [];
  for (let step = 0; step < steps; step++) {
    const saved: Block[] = [];
    range("## forward ##", () => {
      for (let k = 0; k < 8; k++) {
        saved.push(alloc(rows * 512 * 4, forwardFrames("norm")), alloc(rows * 4 * 2, forwardFrames("norm")));
        if (step === 0 && k === 0) workspaces.push(alloc(32 * MiB, forwardFrames("linear")));
        saved.push(alloc(rows * 2048 * 4, forwardFrames("linear")), alloc(rows * 2048 * 4, forwardFrames("gelu")));
        saved.push(alloc(rows * 512 * 4, forwardFrames("linear")));
      }
      saved.push(alloc(rows * 1000 * 4, forwardFrames("linear")));
      saved.push(alloc(rows * 1000 * 4, LOSS), alloc(512, LOSS));
    });
    range("## backward ##", () => {
      const made: Block[] = [];
      let workspace = false;
      // Backward runs the parameters in reverse; every op's input grad is a temporary.
      for (let i = params.length - 1; i >= 0; i--) {
        const tmp = alloc(rows * 512 * 4, []);
        if (!workspace && step === 0) {
          workspaces.push(alloc(32 * MiB, []));
          workspace = true;
        }
        const g = alloc(params[i]!.request, []);
        if (grads === null) made.push(g);
        else free(g); // accumulated into the kept gradient, then dropped
        free(tmp);
      }
      if (grads === null) grads = made.reverse();
      for (const s of saved.splice(0)) free(s);
    });
    range("## optimizer ##", () =>
      range("Optimizer.step#AdamW.step", () => {
        if (step === 0) for (const q of params) state.push(alloc(q.request, OPTIM), alloc(q.request, OPTIM));
        const tmp = params.map((q) => alloc(q.request, OPTIM_TEMP));
        for (const b of tmp) free(b);
      }),
    );
    if (p.zeroGrad)
      range("Optimizer.zero_grad#AdamW.zero_grad", () => {
        for (const g of grads ?? []) free(g);
        grads = null;
      });
  }
  void y;
  const live = (bs: Block[]) => bs.filter((b) => b.live);
  const sum = (bs: Block[]) => ({ blocks: live(bs).length, bytes: live(bs).reduce((s, b) => s + b.size, 0) });
  const all = segments.flatMap((s) => s.blocks);
  const facts: ProgramFacts = {
    parameters: sum(params),
    gradients: sum(grads ?? []),
    optimizer_state: sum(state),
    input: sum([x, y]),
    workspaces: sum(workspaces),
    memory_allocated: sum(all).bytes,
  };
  state = [];
  const finalSegments: PickleData[] = segments.map((s) => {
    const blocks: PickleData[] = [];
    let at = s.address;
    for (const b of s.blocks) {
      if (b.address > at) blocks.push({ address: at, size: b.address - at, requested_size: 0, state: "inactive", frames: [] });
      blocks.push({ address: b.address, size: b.size, requested_size: b.live ? b.request : 0, state: b.live ? "active_allocated" : "inactive", frames: b.live && withFrames ? b.frames : [] });
      at = b.address + b.size;
    }
    if (at < s.address + s.size) blocks.push({ address: at, size: s.address + s.size - at, requested_size: 0, state: "inactive", frames: [] });
    const allocated = s.blocks.filter((b) => b.live).reduce((x, b) => x + b.size, 0);
    return {
      device: 0,
      address: s.address,
      total_size: s.size,
      allocated_size: allocated,
      active_size: allocated,
      requested_size: s.blocks.filter((b) => b.live).reduce((x, b) => x + b.request, 0),
      stream: 0,
      segment_type: s.size <= SEGMENT_SMALL && s.blocks.every((b) => b.size <= SMALL) ? "small" : "large",
      segment_pool_id: new Tuple([0, 0]),
      is_expandable: false,
      frames: [],
      blocks,
    };
  });
  return { snapshot: { segments: finalSegments, device_traces: [trace], allocator_settings: {}, external_annotations: annotations }, facts };
}
