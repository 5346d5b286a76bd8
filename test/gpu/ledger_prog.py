"""The programs behind issue 40's ledger evidence: each writes NVML's used bytes of its own process
(pynvml, nvmlDeviceGetComputeRunningProcesses) beside torch's figures at known moments, before and
after each event, so the ledger's rows can be held to what the driver says. Run from the repository
root on a GPU machine, under `gpumem-tui run --json` or plainly (bench/gpu-parts/ledger.sh):

    python3 test/gpu/ledger_prog.py --case CASE --out OUT [--pause S]
    python3 -m torch.distributed.run --standalone --nproc-per-node=1 test/gpu/ledger_prog.py --case nccl --out OUT

--case:
  bare      torch.zeros(1) on the GPU, then a 1024x1024 matmul: what the CUDA context is (NVML used with
            torch holding one 512-byte block in one 2 MiB segment), and how it grows as kernels load
  gpt2      transformers' GPT-2 from a config (6 layers, 512 wide), 16x256, AdamW, 4 steps
  compile   the small GPT-2 of the compile-graphs fixture under torch.compile(mode="reduce-overhead")
            (CUDA graphs: a private pool), 4 steps; `pools` per segment_pool_id at every sample
  rawmalloc a small model, then 256 MiB with a raw cudaMalloc through ctypes (the libcudart torch
            loaded) inside record_function("gpumem:cudart:cudaMalloc"), then cudaFree
  nccl      (under torchrun, one rank) init_process_group("nccl"), an all_reduce (the communicator is
            made at the first collective), a second one, new_group + an all_reduce on it,
            destroy_process_group
  fsdp2     (under torchrun, one rank per GPU) init_process_group("nccl"), the GPT-2 with fully_shard
            per block and at the top, --steps AdamW steps (the communicator made at the first
            all-gather), destroy_process_group
  --ready PATH (gpt2, fsdp2): write PATH after step 2 and wait there up to 60 s for PATH.go (an
            attach's moment: bench/gpu-parts/ledger.sh attaches, then writes it)

Writes OUT/ledger-CASE.facts.json: `samples` (at, t_unix_ns, nvml_used, allocated, reserved, pools
where asked), `context_bytes` (NVML used − reserved at the first sample after CUDA init), `events`
(NVML used − reserved across each event, by name), torch's version, the agent's mode; and, under
`gpumem-tui run`, OUT/ledger-CASE.ring (+ .json: the manifest), the agent's compact copy of its ring.
`--pause`: seconds each state is held after its sample, so the monitor's 1-s documents see it.

Exit status: 0; 2 where torch, pynvml or a CUDA device is missing; 3 where the case failed (the
facts say so).
"""
import argparse
import ctypes
import importlib.util
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "snapshots"))

GPT2 = dict(n_layer=6, n_embd=512, n_head=8, vocab_size=50257, n_positions=256)
RAW_BYTES = 256 << 20
# The name a program gives a library event of its own (docs/ledger.md): a record_function range.
RAW_MARK = "gpumem:cudart:cudaMalloc"


def fail(message, code):
    sys.stderr.write("ledger_prog: %s\n" % message)
    sys.exit(code)


class Facts:
    def __init__(self, torch, case, pause, with_pools=False):
        import pynvml

        self.torch = torch
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.pid = os.getpid()
        self.case = case
        self.pause = pause
        self.with_pools = with_pools
        self.samples = []
        self.events = []

    def nvml_used(self):
        """NVML's used bytes of this process, summed over the GPUs that list it (None: listed nowhere)."""
        n = self.nvml
        total = None
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            for p in n.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == self.pid and p.usedGpuMemory is not None:
                    total = (total or 0) + int(p.usedGpuMemory)
        return total

    def device(self):
        """Device 0's NVML memory (v2 where this pynvml has it: reserved apart)."""
        n = self.nvml
        h = n.nvmlDeviceGetHandleByIndex(0)
        try:
            m = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
            return {"total": m.total, "reserved": m.reserved, "used": m.used, "free": m.free}
        except Exception:
            m = n.nvmlDeviceGetMemoryInfo(h)
            return {"total": m.total, "reserved": None, "used": m.used, "free": m.free}

    def sample(self, at, cuda=True):
        torch = self.torch
        s = {"at": at, "t_unix_ns": None, "nvml_used": None, "allocated": None, "reserved": None}
        if cuda:
            torch.cuda.synchronize()
            s["allocated"] = torch.cuda.memory_allocated(0)
            s["reserved"] = torch.cuda.memory_reserved(0)
            if self.with_pools:
                from capture_more import pools

                s["pools"] = pools(torch.cuda.memory._snapshot())
        s["t_unix_ns"] = time.time_ns()
        s["nvml_used"] = self.nvml_used()
        s["device"] = self.device()
        self.samples.append(s)
        print("ledger_prog %s: %-24s nvml %s allocated %s reserved %s" % (self.case, at, s["nvml_used"], s["allocated"], s["reserved"]), flush=True)
        if self.pause > 0:
            time.sleep(self.pause)
        return s

    def event(self, name, before, after, expected=None):
        """NVML used − reserved across an event: what it took outside torch's allocator."""
        def outside(s):
            return None if s["nvml_used"] is None else s["nvml_used"] - (s["reserved"] or 0)
        b, a = outside(before), outside(after)
        e = {"name": name, "before": before["at"], "after": after["at"], "outside_delta": None if a is None or b is None else a - b,
             "nvml_delta": None if after["nvml_used"] is None or before["nvml_used"] is None else after["nvml_used"] - before["nvml_used"]}
        if expected is not None:
            e["expected_bytes"] = expected
        self.events.append(e)
        return e


def loaded_cudart():
    """The libcudart this process loaded (torch's), else libcuda's driver API: (lib, kind)."""
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f if "libcudart.so" in ln and ln.split()[-1].startswith("/")})
    if paths:
        return ctypes.CDLL(paths[0]), "cudart:" + paths[0]
    return ctypes.CDLL("libcuda.so.1"), "driver"


def raw_malloc(size):
    """A raw allocation of `size` bytes outside torch's allocator: (pointer, free function, how)."""
    lib, how = loaded_cudart()
    p = ctypes.c_void_p()
    if how == "driver":
        rc = lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size))
        free = lambda: lib.cuMemFree_v2(p)  # noqa: E731
    else:
        rc = lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
        free = lambda: lib.cudaFree(p)  # noqa: E731
    if rc != 0:
        raise RuntimeError("raw allocation of %d bytes through %s failed: %d" % (size, how, rc))
    # Touch it, so the pages are the driver's for certain (NVML counts them at allocation anyway).
    cudart = lib if how != "driver" else None
    if cudart is not None:
        cudart.cudaMemset(p, 0, ctypes.c_size_t(size))
    return p, free, how


def gpt2_model(torch, dev, cfg_kwargs):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(**cfg_kwargs)
    return GPT2LMHeadModel(cfg).to(dev), cfg


def case_bare(torch, f):
    f.sample("before_cuda", cuda=False)
    x = torch.zeros(1, device="cuda")
    ctx = f.sample("after_zeros")
    a = torch.randn(1024, 1024, device="cuda")
    b = a @ a
    mm = f.sample("after_matmul")
    f.event("context", f.samples[0], ctx)
    f.event("first_matmul", ctx, mm)
    del x, a, b


READY = {"path": None}  # --ready: where to say "attach now", after step 2


def ready_point(step):
    """After step 2 where --ready asked: say so, and wait (at most 60 s) for the attach to be done."""
    path = READY["path"]
    if path is None or step != 2:
        return
    with open(path + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    deadline = time.monotonic() + 60
    while not os.path.exists(path + ".go") and time.monotonic() < deadline:
        time.sleep(0.05)


def train_steps(torch, f, model, batch, steps, compiled=None, mark_step=False):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # Not `compiled or model`: truth-testing a torch.compile'd module calls its __len__, which a
    # module without one (GPT2LMHeadModel) answers with a TypeError.
    run = model if compiled is None else compiled
    prev = f.samples[-1]
    for i in range(steps):
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        x = batch()
        out = run(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        cur = f.sample("step%d" % (i + 1))
        f.event("step%d" % (i + 1), prev, cur)
        prev = cur
        ready_point(i + 1)
    return opt


def gpt2_sampled(torch, f, cfg_kwargs):
    """A GPT-2 made on GPU 0 after its context: NVML sampled after torch.zeros(1) and after the
    model, the model's event between them. The device, the model and its config."""
    dev = torch.device("cuda", 0)
    torch.zeros(1, device=dev)
    ctx = f.sample("after_zeros")
    model, cfg = gpt2_model(torch, dev, cfg_kwargs)
    f.event("model", ctx, f.sample("model"))
    return dev, model, cfg


STEPS = {"n": 4}  # --steps


def case_gpt2(torch, f):
    dev, model, cfg = gpt2_sampled(torch, f, GPT2)
    return train_steps(torch, f, model, lambda: torch.randint(0, cfg.vocab_size, (16, 256), device=dev), STEPS["n"]), model


def case_fsdp2(torch, f):
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    s0 = f.sample("before_init")
    dist.init_process_group("nccl", device_id=dev)
    f.event("init_process_group", s0, f.sample("after_init"))
    m0 = f.samples[-1]
    model, cfg = gpt2_model(torch, dev, GPT2)
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    f.event("model", m0, f.sample("model"))
    opt = train_steps(torch, f, model, lambda: torch.randint(0, cfg.vocab_size, (16, 256), device=dev), STEPS["n"])
    last = f.samples[-1]
    dist.destroy_process_group()
    f.event("destroy_process_group", last, f.sample("after_destroy"))
    return opt, model


def case_compile(torch, f):
    from capture_common import GPT2_CONFIG

    dev, model, cfg = gpt2_sampled(torch, f, GPT2_CONFIG)
    compiled = torch.compile(model, mode="reduce-overhead")
    return train_steps(torch, f, model, lambda: torch.randint(0, cfg.vocab_size, (4, 64), device=dev), 4, compiled, mark_step=True), model


def case_rawmalloc(torch, f):
    from torch.profiler import record_function

    dev = torch.device("cuda", 0)
    torch.zeros(1, device=dev)
    f.sample("after_zeros")
    model = torch.nn.Linear(1024, 1024).to(dev)
    y = model(torch.randn(64, 1024, device=dev)).sum()
    y.backward()
    before = f.sample("before_malloc")
    with record_function(RAW_MARK):
        p, free, how = raw_malloc(RAW_BYTES)
    after = f.sample("after_malloc")
    f.event(RAW_MARK, before, after, expected=RAW_BYTES)
    with record_function("gpumem:cudart:cudaFree"):
        free()
    freed = f.sample("after_free")
    f.event("gpumem:cudart:cudaFree", after, freed, expected=-RAW_BYTES)
    return how, model


def case_nccl(torch, f):
    import torch.distributed as dist

    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)
    s0 = f.sample("before_init")
    dist.init_process_group("nccl")
    s1 = f.sample("after_init")
    f.event("init_process_group", s0, s1)
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)
    s2 = f.sample("after_first_all_reduce")
    f.event("first_collective", s1, s2)
    dist.all_reduce(t)
    s3 = f.sample("after_second_all_reduce")
    f.event("second_collective", s2, s3)
    g = dist.new_group([0])
    s4 = f.sample("after_new_group")
    f.event("new_group", s3, s4)
    dist.all_reduce(t, group=g)
    s5 = f.sample("after_group_all_reduce")
    f.event("group_first_collective", s4, s5)
    dist.destroy_process_group()
    s6 = f.sample("after_destroy")
    f.event("destroy_process_group", s5, s6)


CASES = {"bare": case_bare, "gpt2": case_gpt2, "compile": case_compile, "rawmalloc": case_rawmalloc, "nccl": case_nccl, "fsdp2": case_fsdp2}


def main():
    ap = argparse.ArgumentParser(description="NVML per-process used beside torch's figures around known events")
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default=None, help="file names' stem (default ledger-CASE)")
    ap.add_argument("--pause", type=float, default=1.2)
    ap.add_argument("--steps", type=int, default=4, help="gpt2, fsdp2: training steps")
    ap.add_argument("--ready", default=None, help="gpt2, fsdp2: write this file after step 2, then wait for FILE.go (at most 60 s)")
    args = ap.parse_args()
    STEPS["n"] = args.steps
    READY["path"] = args.ready
    for module in ("torch", "pynvml") + (("transformers",) if args.case in ("gpt2", "compile", "fsdp2") else ()):
        if importlib.util.find_spec(module) is None:
            fail("the Python package %s is not installed for %s" % (module, sys.executable), 2)
    import torch

    if not torch.cuda.is_available():
        fail("torch %s sees no CUDA device" % torch.__version__, 2)
    os.makedirs(args.out, exist_ok=True)
    name = args.name or "ledger-" + args.case
    f = Facts(torch, args.case, args.pause, with_pools=args.case == "compile")
    error = None
    extra = {}
    alive = None
    try:
        r = CASES[args.case](torch, f)
        if args.case == "rawmalloc":
            extra["raw_malloc_via"], alive = r
        else:
            alive = r
    except Exception as e:
        traceback.print_exc()
        error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    first = next((s for s in f.samples if s["nvml_used"] is not None and s["reserved"] is not None), None)
    facts = {
        "case": args.case, "pid": f.pid, "error": error, "torch_version": torch.__version__,
        "samples": f.samples, "events": f.events, **extra,
        "context_bytes": None if first is None else first["nvml_used"] - first["reserved"],
        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING"),
        "rank": os.environ.get("RANK"),
    }
    agent_mod = sys.modules.get("gpumem_agent")
    a = agent_mod.current() if agent_mod else None
    if a is not None and a.ring is not None:
        try:
            facts["records"] = agent_mod.save_ring(os.path.join(args.out, name + ".ring"))
            facts["agent_mode"] = a.mode
            facts["agent_notes"] = dict(a.notes)
        except Exception as e:
            facts["records"] = None
            facts["agent"] = "save_ring failed: %s" % e
    else:
        facts.update({"records": None, "agent": "not attached (not run under gpumem-tui run)"})
    with open(os.path.join(args.out, name + ".facts.json"), "w") as fh:
        json.dump(facts, fh, indent=1)
    for e in f.events:
        print("ledger_prog %s: event %-28s outside-torch delta %s nvml delta %s%s" % (
            args.case, e["name"], e["outside_delta"], e["nvml_delta"],
            "" if "expected_bytes" not in e else " (expected %d)" % e["expected_bytes"]), flush=True)
    del alive
    if error is not None:
        fail("case %s failed: %s" % (args.case, error), 3)


if __name__ == "__main__":
    main()
