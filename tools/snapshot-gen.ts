// A large PyTorch memory snapshot, written piece by piece (pickler.ts) as Python's pickler writes
// what torch.cuda.memory._dump_snapshot hands it (protocol 4: 64 KiB FRAMEs, every dict, list and
// new string memoized, repeated keys and shared frame dicts read back with BINGET, a fresh
// `compile_context` string and frames list per entry: the layout of the H100 snapshots in
// test/fixtures/snapshots). Every entry is distinct: addresses, sizes and times never repeat, and
// frames come from a few hundred distinct stacks of real file and function names.
//
// The trace is a training loop recorded mid-run: the parameters' segment exists before the
// recording (only the final segments hold it); each step maps a fresh segment, allocates forward
// activations (module frames), backward gradients and temporaries (no frames: autograd's thread),
// AdamW's temporaries inside `Optimizer.step#AdamW.step`, frees them all and gives the segment back.
//   bun tools/snapshot-gen.ts OUT.pickle [MiB]      (default 1024)
import { OP, Pickler } from "./pickler";

const FILES = [
  ["torch/nn/modules/module.py", ["_call_impl", "_wrapped_call_impl"]],
  ["torch/nn/modules/linear.py", ["forward"]],
  ["torch/nn/modules/normalization.py", ["forward"]],
  ["torch/nn/modules/dropout.py", ["forward"]],
  ["torch/nn/functional.py", ["layer_norm", "dropout", "embedding", "cross_entropy", "gelu"]],
  ["transformers/models/gpt2/modeling_gpt2.py", ["forward", "_attn", "_split_heads"]],
  ["transformers/pytorch_utils.py", ["forward"]],
  ["transformers/integrations/sdpa_attention.py", ["sdpa_attention_forward"]],
  ["torch/optim/adam.py", ["step", "_multi_tensor_adam", "_init_group", "adam"]],
  ["torch/optim/optimizer.py", ["wrapper", "_use_grad", "maybe_fallback"]],
  ["train.py", ["train_step", "main", "<module>"]],
] as const;
const SITE = "/opt/torch/.venv/lib/python3.12/site-packages/";

interface Frame {
  name: string;
  filename: string;
  line: number;
  memo: number | null;
}

export interface Generated {
  bytes: number;
  entries: number;
  annotations: number;
  steps: number;
}

/** Write a snapshot of at least `targetBytes` to `path`. */
export function writeBigSnapshot(path: string, targetBytes: number): Generated {
  let seed = 42;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  // A few hundred distinct frames, shared between stacks as torch shares its frame dicts.
  const frames: Frame[] = [];
  for (const [file, names] of FILES) for (const name of names) for (let k = 0; k < 8; k++) frames.push({ name, filename: file === "train.py" ? `/home/user/${file}` : SITE + file, line: 20 + Math.floor(rand() * 2000), memo: null });
  const byFile = (f: string) => frames.filter((x) => x.filename.endsWith(f));
  const stack = (inner: Frame[], depth: number) => [...inner, ...Array.from({ length: depth }, () => pick(byFile("module.py"))), ...byFile("train.py").slice(0, 3)];
  const forward = Array.from({ length: 200 }, () => stack([pick([...byFile("functional.py"), ...byFile("linear.py"), ...byFile("modeling_gpt2.py")])], 3 + Math.floor(rand() * 8)));
  const optim = Array.from({ length: 40 }, () => [pick(byFile("adam.py")), pick(byFile("adam.py")), pick(byFile("optimizer.py")), ...byFile("train.py").slice(0, 3)]);

  const p = Pickler.beginDict(path);

  // segments: the parameters' segment, from before the recording (its blocks have no frames)
  const paramBase = 0x7f1000000000;
  const params = Array.from({ length: 300 }, () => 512 * (256 + Math.floor(rand() * 4096)));
  const paramTotal = params.reduce((a, b) => a + b, 0);
  const segSize = Math.ceil((paramTotal + 2 * 2 ** 20) / 2 ** 21) * 2 ** 21;
  p.str("segments");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  p.op(OP.EMPTY_DICT);
  p.memoize();
  p.op(OP.MARK);
  const kv = (k: string, v: () => void) => (p.str(k), v());
  kv("device", () => p.int(0));
  kv("address", () => p.int(paramBase));
  kv("total_size", () => p.int(segSize));
  kv("allocated_size", () => p.int(paramTotal));
  kv("active_size", () => p.int(paramTotal));
  kv("requested_size", () => p.int(paramTotal));
  kv("stream", () => p.int(0));
  kv("segment_type", () => p.str("large"));
  kv("segment_pool_id", () => (p.int(0), p.int(0), p.op(OP.TUPLE2), p.memoize()));
  kv("is_expandable", () => p.op(OP.NEWFALSE));
  kv("frames", () => (p.op(OP.EMPTY_LIST), p.memoize()));
  kv("blocks", () => {
    p.op(OP.EMPTY_LIST);
    p.memoize();
    p.op(OP.MARK);
    let at = paramBase;
    const block = (size: number, state: string) => {
      p.op(OP.EMPTY_DICT);
      p.memoize();
      p.op(OP.MARK);
      kv("address", () => p.int(at));
      kv("size", () => p.int(size));
      kv("requested_size", () => p.int(state === "inactive" ? 0 : size));
      kv("state", () => p.str(state));
      kv("frames", () => (p.op(OP.EMPTY_LIST), p.memoize()));
      p.op(OP.SETITEMS);
      at += size;
    };
    for (const s of params) block(s, "active_allocated");
    block(segSize - paramTotal, "inactive");
    p.op(OP.APPENDS);
  });
  p.op(OP.SETITEMS);
  p.op(OP.APPEND);

  // device_traces: one device
  p.str("device_traces");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  p.op(OP.EMPTY_LIST);
  p.memoize();
  let entries = 0;
  let inBatch = 0;
  let time = 1_795_413_425_584_941;
  const anns: Array<[string, string, number]> = [];
  const entry = (action: string, addr: number, size: number, st: Frame[] | null) => {
    if (inBatch === 0) p.op(OP.MARK);
    p.op(OP.EMPTY_DICT);
    p.memoize();
    p.op(OP.MARK);
    kv("action", () => p.str(action));
    kv("addr", () => p.int(addr));
    kv("size", () => p.int(size));
    kv("stream", () => p.int(0));
    time += 1 + Math.floor(rand() * 40);
    kv("time_us", () => p.int(time));
    kv("compile_context", () => p.newStr("N/A"));
    kv("user_metadata", () => p.str(""));
    kv("frames", () => {
      p.op(OP.EMPTY_LIST);
      p.memoize();
      if (!st || st.length === 0) return;
      if (st.length > 1) p.op(OP.MARK);
      for (const f of st) {
        if (f.memo !== null) {
          p.get(f.memo);
          continue;
        }
        p.op(OP.EMPTY_DICT);
        f.memo = p.memoize();
        p.op(OP.MARK);
        kv("name", () => p.str(f.name));
        kv("filename", () => p.str(f.filename));
        kv("line", () => p.int(f.line));
        p.op(OP.SETITEMS);
      }
      p.op(st.length > 1 ? OP.APPENDS : OP.APPEND);
    });
    p.op(OP.SETITEMS);
    entries++;
    if (++inBatch === 1000) {
      p.op(OP.APPENDS);
      inBatch = 0;
    }
    p.endOfItem();
  };

  let steps = 0;
  let base = 0x7f2000000000;
  while (p.written < targetBytes) {
    const seg = 512 * 2 ** 20;
    entry("segment_alloc", base, seg, pick(forward));
    let at = base;
    const live: Array<[number, number, Frame[] | null]> = [];
    const alloc = (st: Frame[] | null) => {
      const size = 512 * (1 + Math.floor(rand() * 2048)) - Math.floor(rand() * 511);
      entry("alloc", at, size, st);
      live.push([at, size, st]);
      at += Math.ceil(size / 512) * 512;
    };
    const free = (k: number) => {
      const [a, s] = live.splice(k, 1)[0]!;
      entry("free_requested", a, s, null);
      entry("free_completed", a, s, null);
    };
    anns.push(["START", "train_step", time]);
    for (let i = 0; i < 120; i++) alloc(pick(forward)); // activations kept for backward
    for (let i = 0; i < 120; i++) {
      alloc(null); // backward: autograd's thread, no frames
      free(live.length - 1 - Math.floor(rand() * 3)); // its temporaries go, activations with them
      if (live.length > 1 && rand() < 0.6) free(0);
    }
    anns.push(["START", "Optimizer.step#AdamW.step", time + 1]);
    for (let i = 0; i < 60; i++) (alloc(pick(optim)), free(live.length - 1));
    anns.push(["END", "Optimizer.step#AdamW.step", time + 1]);
    while (live.length) free(live.length - 1);
    entry("segment_free", base, seg, null);
    anns.push(["END", "train_step", time + 1]);
    time += 2;
    base += seg;
    steps++;
  }
  if (inBatch > 0) p.op(OP.APPENDS);
  p.op(OP.APPEND);

  p.str("allocator_settings");
  p.op(OP.EMPTY_DICT);
  p.memoize();
  p.op(OP.MARK);
  kv("PYTORCH_CUDA_ALLOC_CONF", () => p.str(""));
  kv("expandable_segments", () => p.op(OP.NEWFALSE));
  p.op(OP.SETITEMS);

  p.str("external_annotations");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  for (let i = 0; i < anns.length; i += 1000) {
    p.op(OP.MARK);
    for (const [stage, name, t] of anns.slice(i, i + 1000)) {
      p.op(OP.EMPTY_DICT);
      p.memoize();
      p.op(OP.MARK);
      kv("stage", () => p.str(stage));
      kv("name", () => p.str(name));
      kv("device", () => p.int(0));
      kv("time_us", () => p.int(t));
      p.op(OP.SETITEMS);
      p.endOfItem();
    }
    p.op(OP.APPENDS);
  }
  p.endDict();
  return { bytes: p.written, entries, annotations: anns.length, steps };
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: bun tools/snapshot-gen.ts OUT.pickle [MiB]");
  console.log(JSON.stringify(writeBigSnapshot(out, Number(process.argv[3] ?? 1024) * 2 ** 20)));
}
