"""Ground truth for issue 41 (will it fit: the largest batch, time to OOM): trainings whose peak at
other batch sizes, largest batch that fits under an allocator cap, peak per input shape and step of
OOM are measured by torch itself (bench/gpu-parts/forecast.sh runs them all).

    # under the monitor, the ring kept (the forecast's input):
    GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR=DIR bun src/cli.ts run --json --output OUT/NAME.run.ndjson -- \\
      python3 test/gpu/forecast_train.py ring --model gpt2 --batch 16 --steps 4 --out OUT --name NAME
    # plainly: torch's peak at each batch, the largest batch a training started at it runs (fresh
    # trials, starting from the forecast's --hints), peaks per shape
    python3 test/gpu/forecast_train.py sweep --out OUT [--only gpt2,resnet50,...] [--hints gpt2=87,resnet50=291]
    # plainly, in a fresh process: does batch B fit (the bisection's boundary checked apart)
    python3 test/gpu/forecast_train.py one --model gpt2 --batch B --out OUT/one-gpt2-B.json

Every mode first caps the caching allocator with torch.cuda.set_per_process_memory_fraction
(--cap-gib, 24 by default: a bisection on a 139 GiB device would take minutes) and records the cap.

Models (from configs, no download; torch.manual_seed(0)):
  gpt2       transformers GPT-2, 6 layers, 512 wide, 8 heads, vocab 50,257, n_positions 1,024, fp32,
             AdamW; batch B x --seq (256); called model(input_ids=x, labels=x)
  gpt2-ckpt  the same with activation checkpointing (gradient_checkpointing_enable, use_reentrant False)
  resnet50   torchvision ResNet50 (weights=None), B x 3 x 224 x 224, SGD with momentum
--attn sdpa|eager: GPT-2's attention (eager keeps the seq x seq weights: quadratic in seq).
--seqs 128,512,...: the sequence length of each step in turn (variable-length batches).
--leak: keep every step's logits on the GPU (the keep-logits leak) until the allocator raises OOM
  (or --steps): the facts name the step that raised it.

ring facts (OUT/NAME.facts.json): cap, device total, outside PyTorch (mem_get_info's used less
reserved, at the first step boundary), per step {step, batch, seq, t (s since the first step's
start), allocated and reserved at the boundary}, torch's peak at the end, oom_step, the ring's counts.
sweep facts (OUT/sweep.json): per model its b0, peaks at b0, 2b0, 4b0 (each trial two steps after
a clean allocator: the first and second step's max_memory_allocated and max_memory_reserved); its
`fresh` search: each trial a training started at that batch on an emptied allocator (a new model
and optimizer after the last one is gone, cuBLAS's workspaces and the cache released: what a new
process has, the CUDA context aside; allocated and reserved before it are in the trial), three
steps, from the --hints batch and one more outward, then halving the gap: the largest batch whose
steps all ran, the first that raised OOM; with --warm-bisect also the older in-process bisection
(the optimizer's state made at b0, the cache emptied between trials: a layout no training started
at that batch has); per attention, peaks per seq.

Exit status: 0; 2 where torch or a CUDA device is missing; 3 where a step failed unexpectedly.
"""
import argparse
import gc
import importlib.util
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GIB = 1 << 30


def fail(message, code):
    sys.stderr.write("forecast_train: %s\n" % message)
    sys.exit(code)


def cap(torch, dev, gib):
    """Caps the allocator at gib GiB (a fraction of the device's total): its figures for the facts."""
    total = torch.cuda.get_device_properties(dev).total_memory
    fraction = min(1.0, gib * GIB / total)
    torch.cuda.set_per_process_memory_fraction(fraction, dev)
    got = None
    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if getter is not None:
        try:
            got = getter(dev)
        except Exception as e:  # the getter's absence or failure is itself a fact for the agent's design
            got = "error: %s" % e
    return {"cap_gib": gib, "fraction": fraction, "device_total": total, "cap_bytes": int(fraction * total),
            "get_per_process_memory_fraction": got, "has_getter": getter is not None}


class Trainer:
    """One model, its optimizer and a step at a given batch and sequence length."""

    def __init__(self, torch, dev, model, attn="sdpa", seq=256):
        self.torch, self.dev, self.kind, self.seq = torch, dev, model, seq
        torch.manual_seed(0)
        if model == "resnet50":
            import torchvision

            self.model = torchvision.models.resnet50(weights=None).to(dev)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        else:
            from transformers import GPT2Config, GPT2LMHeadModel

            cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=50257, n_positions=1024)
            try:
                cfg._attn_implementation = attn
            except Exception:
                pass
            self.model = GPT2LMHeadModel(cfg).to(dev)
            try:
                self.model.set_attn_implementation(attn)
            except Exception:
                pass
            self.model.config.use_cache = False
            if model == "gpt2-ckpt":
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.model.train()
        self.attn = getattr(getattr(self.model, "config", None), "_attn_implementation", None) if model != "resnet50" else None
        self.parameters = sum(p.numel() for p in self.model.parameters())

    def step(self, batch, seq=None, keep=None):
        """One training step; keep: a list that gets this step's logits (the leak)."""
        torch = self.torch
        from torch.profiler import record_function

        seq = seq or self.seq
        with record_function("data"):
            if self.kind == "resnet50":
                x = torch.randn(batch, 3, 224, 224, device=self.dev)
                y = torch.randint(0, 1000, (batch,), device=self.dev)
            else:
                x = torch.randint(0, 50257, (batch, seq), device=self.dev)
        with record_function("train_step"):
            if self.kind == "resnet50":
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
            else:
                out = self.model(input_ids=x, labels=x)
                loss = out.loss
                if keep is not None:
                    keep.append(out.logits.detach().clone())
                del out
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        return loss.item()

    def clean(self):
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        self.torch.cuda.empty_cache()


def run_steps(torch, dev, t, batch, seq, steps):
    """`steps` steps of trainer `t` at batch, each after a peak reset, until one raises OOM: each
    step's peaks, and the OOM's first line (None where every step ran)."""
    peaks, error = [], None
    for _ in range(steps):
        torch.cuda.reset_peak_memory_stats(dev)
        try:
            t.step(batch, seq)
        except torch.OutOfMemoryError as e:
            error = str(e).strip().splitlines()[0][:300]
            break
        torch.cuda.synchronize(dev)
        peaks.append({"max_allocated": torch.cuda.max_memory_allocated(dev), "max_reserved": torch.cuda.max_memory_reserved(dev),
                      "allocated": torch.cuda.memory_allocated(dev)})
    return peaks, error


def measured(t, batch, seq=None, steps=2):
    """Runs `steps` steps at batch (each after a peak reset): fits, each step's peaks, the error."""
    torch, dev = t.torch, t.dev
    t.clean()
    peaks, error = run_steps(torch, dev, t, batch, seq, steps)
    t.clean()
    return {"batch": batch, "seq": seq, "fits": error is None, "peaks": peaks, "error": error}


def bisect(t, known, budget_end, limit=8192):
    """The largest batch whose steps run under the cap, from the trials known (batch -> fits):
    doubling past the largest fit, then halving the gap. Returns (largest, trials)."""
    trials = []

    def trial(b):
        r = measured(t, b)
        trials.append(r)
        known[b] = r["fits"]
        return r["fits"]

    lo = max([b for b, ok in known.items() if ok], default=0)
    hi = min([b for b, ok in known.items() if not ok], default=None)
    while hi is None and time.time() < budget_end:
        b = max(1, lo * 2)
        if b > limit:
            break
        if trial(b):
            lo = b
        else:
            hi = b
    while hi is not None and hi - lo > 1 and time.time() < budget_end:
        mid = (lo + hi) // 2
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi, trials


def release(torch):
    """Everything the allocator caches goes back: what a new process starts from, its CUDA context aside."""
    gc.collect()
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.empty_cache()


def fresh_trial(torch, dev, kind, batch, args, steps=3):
    """A training started at `batch` on an emptied allocator: a new model and optimizer, `steps` steps."""
    release(torch)
    before = {"allocated": torch.cuda.memory_allocated(dev), "reserved": torch.cuda.memory_reserved(dev)}
    t = Trainer(torch, dev, kind, seq=args.seq)
    peaks, error = run_steps(torch, dev, t, batch, None, steps)
    t.opt.zero_grad(set_to_none=True)
    del t
    release(torch)
    return {"batch": batch, "fits": error is None, "peaks": peaks, "error": error, "failed_step": None if error is None else len(peaks) + 1,
            "before": before}


def fresh_search(torch, dev, kind, start, args, budget_end, limit=8192):
    """The largest batch a fresh training runs: `start` and one more, outward by doubling steps
    until both sides are seen, then halving the gap. Returns its facts."""
    trials, known = [], {}

    def trial(b):
        r = fresh_trial(torch, dev, kind, b, args)
        trials.append(r)
        known[b] = r["fits"]
        return r["fits"]

    lo, hi = None, None
    if trial(start):
        lo, b, step = start, start + 1, 1
        while hi is None and b <= limit and time.time() < budget_end:
            if trial(b):
                lo, step = b, step * 2
                b = lo + step
            else:
                hi = b
    else:
        hi, b, step = start, start - 1, 1
        while lo is None and b >= 1 and time.time() < budget_end:
            if trial(b):
                lo = b
            else:
                hi, step = b, step * 2
                b = hi - step
        if lo is None and b < 1:
            lo = 0
    while lo is not None and hi is not None and hi - lo > 1 and time.time() < budget_end:
        mid = (lo + hi) // 2
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return {"start": start, "trials": trials, "largest_fit": lo, "first_fail": hi,
            "complete": lo is not None and hi is not None and hi - lo == 1}


def sweep(torch, dev, args, capped):
    out = {"cap": capped, "torch": torch.__version__, "models": {}, "shapes": {}}
    path = os.path.join(args.out, "sweep.json")
    only = set(args.only.split(",")) if args.only else None
    hints = dict((k, int(v)) for k, v in (h.split("=") for h in args.hints.split(",") if "=" in h)) if args.hints else {}
    end = time.time() + args.budget

    def save():
        with open(path, "w") as f:
            json.dump(out, f, indent=1)

    for kind, b0 in (("gpt2", args.b0), ("resnet50", args.b0), ("gpt2-ckpt", args.b0)):
        if only and kind not in only:
            continue
        t0 = time.time()
        t = Trainer(torch, dev, kind, seq=args.seq)
        t.step(b0)  # the optimizer's state exists from here on, as in a training's steady steps
        entry = {"b0": b0, "seq": None if kind == "resnet50" else args.seq, "parameters": t.parameters, "attn": t.attn, "batches": {}}
        known = {}
        for b in (b0, 2 * b0, 4 * b0):
            r = measured(t, b)
            entry["batches"][str(b)] = r
            known[b] = r["fits"]
        entry.update({"largest_fit": None, "first_fail": None, "trials": [], "bisection_complete": False})
        if args.warm_bisect:
            largest, first_fail, trials = bisect(t, known, min(end, time.time() + args.bisect_budget))
            entry.update({"largest_fit": largest, "first_fail": first_fail, "trials": trials,
                          "bisection_complete": first_fail is not None and first_fail - largest == 1})
        t.opt.zero_grad(set_to_none=True)
        del t
        release(torch)
        start = hints.get(kind) or max([b for b, ok in known.items() if ok], default=b0)
        entry["fresh"] = fresh_search(torch, dev, kind, start, args, min(end, time.time() + args.bisect_budget))
        entry["seconds"] = round(time.time() - t0, 2)
        out["models"][kind] = entry
        save()
        fr = entry["fresh"]
        print("sweep %s: b0 %d peaks %s; fresh from %d: largest fit %s, first fail %s (%d trials); in-process %s/%s, %.1f s" % (
            kind, b0, {b: (r["peaks"][-1]["max_allocated"] if r["peaks"] else None) for b, r in entry["batches"].items()},
            start, fr["largest_fit"], fr["first_fail"], len(fr["trials"]), entry["largest_fit"], entry["first_fail"], entry["seconds"]), flush=True)
    for attn in ("sdpa", "eager"):
        if only and ("shapes-" + attn) not in only:
            continue
        if time.time() > end:
            out["shapes"][attn] = {"skipped": "budget"}
            break
        t = Trainer(torch, dev, "gpt2", attn=attn, seq=args.seq)
        seqs = [int(s) for s in args.seqs.split(",")]
        t.step(args.var_batch, seqs[0])
        per = {}
        for s in sorted(set(seqs)):
            per[str(s)] = measured(t, args.var_batch, s)
        out["shapes"][attn] = {"batch": args.var_batch, "attn": t.attn, "per_seq": per}
        del t
        gc.collect()
        torch.cuda.empty_cache()
        save()
        print("shapes %s: batch %d %s" % (attn, args.var_batch,
              {s: (r["peaks"][-1]["max_allocated"] if r["peaks"] else None) for s, r in per.items()}), flush=True)
    save()


def ring(torch, dev, args, capped):
    """The training the monitor records: its steps' shapes and figures, the OOM's step under --leak."""
    from compile_graphs import ring_facts  # the rings' facts fields, one definition

    t = Trainer(torch, dev, args.model, attn=args.attn, seq=args.seq)
    seqs = [int(s) for s in args.seqs.split(",")] if args.seqs else [args.seq]
    keep = [] if args.leak else None
    steps, oom_step, error, outside = [], None, None, None
    start = time.time()
    for i in range(args.steps):
        seq = seqs[i % len(seqs)]
        try:
            loss = t.step(args.batch, seq, keep)
        except torch.OutOfMemoryError as e:
            if not args.leak:
                error = "OutOfMemoryError at step %d: %s" % (i + 1, str(e).strip().splitlines()[0][:300])
                break
            oom_step = i + 1  # the step that raised it (steps counted from 1)
            steps.append({"step": i + 1, "oom": True, "t": round(time.time() - start, 4), "kept": len(keep)})
            break
        except Exception as e:
            traceback.print_exc()
            error = "%s at step %d: %s" % (type(e).__name__, i + 1, str(e).strip().splitlines()[:1])
            break
        row = {"step": i + 1, "batch": args.batch, "seq": None if args.model == "resnet50" else seq,
               "t": round(time.time() - start, 4), "loss": round(loss, 4),
               "allocated": torch.cuda.memory_allocated(dev), "reserved": torch.cuda.memory_reserved(dev)}
        if outside is None:
            free, total = torch.cuda.mem_get_info(dev)
            outside = {"used": total - free, "reserved": row["reserved"], "outside": total - free - row["reserved"]}
        steps.append(row)
    if keep is not None:
        kept_bytes = sum(k.numel() * k.element_size() for k in keep)
    torch.cuda.synchronize(dev)
    facts = {"scenario": args.name, "model": args.model, "attn": t.attn, "batch": args.batch, "seqs": seqs, "cap": capped,
             "parameters": t.parameters, "leak": args.leak, "oom_step": oom_step, "error": error,
             "outside_pytorch": outside, "steps_done": len([s for s in steps if not s.get("oom")]), "per_step": steps,
             "max_memory_allocated": torch.cuda.max_memory_allocated(dev), "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
             "memory_allocated": torch.cuda.memory_allocated(dev), "memory_reserved": torch.cuda.memory_reserved(dev),
             "num_ooms": torch.cuda.memory_stats(dev).get("num_ooms", 0), "torch_version": torch.__version__,
             "kept_bytes": kept_bytes if keep is not None else None}
    mod = sys.modules.get("gpumem_agent")
    a = mod.current() if mod else None
    if a is not None and a.ring is not None:
        facts["records"] = mod.save_ring(os.path.join(args.out, args.name + ".ring"))
        facts.update(ring_facts(a))
    else:
        facts.update({"records": None, "agent": "not attached"})
    with open(os.path.join(args.out, args.name + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print("forecast_train ring %s: %d steps, oom_step %s, peak %d, records %s, error %s"
          % (args.name, facts["steps_done"], oom_step, facts["max_memory_allocated"], facts["records"], error), flush=True)
    if error is not None:
        fail(error, 3)


def one(torch, dev, args, capped):
    """A fresh process's answer for one batch: the bisection's boundary checked apart."""
    t = Trainer(torch, dev, args.model, attn=args.attn, seq=args.seq)
    r = {"model": args.model, "batch": args.batch, "cap": capped, "steps": []}
    try:
        for _ in range(args.steps):
            torch.cuda.reset_peak_memory_stats(dev)
            t.step(args.batch)
            torch.cuda.synchronize(dev)
            r["steps"].append({"max_allocated": torch.cuda.max_memory_allocated(dev), "max_reserved": torch.cuda.max_memory_reserved(dev)})
        r["fits"] = True
    except torch.OutOfMemoryError as e:
        r.update({"fits": False, "error": str(e).strip().splitlines()[0][:300], "failed_step": len(r["steps"]) + 1})
    with open(args.result, "w") as f:
        json.dump(r, f, indent=1)
    print("forecast_train one %s batch %d: fits %s %s" % (args.model, args.batch, r["fits"], [s["max_allocated"] for s in r["steps"]]), flush=True)


def main():
    ap = argparse.ArgumentParser(description="ground truth for the batch forecast and time to OOM")
    ap.add_argument("mode", choices=("ring", "sweep", "one"))
    ap.add_argument("--model", default="gpt2", choices=("gpt2", "gpt2-ckpt", "resnet50"))
    ap.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--seqs", help="ring: each step's sequence length in turn; sweep: the lengths measured")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--out", default=".")
    ap.add_argument("--name", default="forecast")
    ap.add_argument("--result", help="one: the JSON file written")
    ap.add_argument("--cap-gib", type=float, default=24)
    ap.add_argument("--b0", type=int, default=16)
    ap.add_argument("--var-batch", type=int, default=8)
    ap.add_argument("--only", help="sweep: comma-separated gpt2,resnet50,gpt2-ckpt,shapes-sdpa,shapes-eager")
    ap.add_argument("--budget", type=float, default=120, help="sweep: seconds for everything")
    ap.add_argument("--bisect-budget", type=float, default=35, help="sweep: seconds per model's search")
    ap.add_argument("--hints", help="sweep: where each model's fresh search starts, e.g. gpt2=87,resnet50=291 (the forecast's)")
    ap.add_argument("--warm-bisect", action="store_true", help="sweep: also the in-process bisection (optimizer state made at b0)")
    args = ap.parse_args()
    if args.mode == "sweep" and not args.seqs:
        args.seqs = "128,256,384,512,768,1024"
    for module in ("torch", "torchvision" if args.model == "resnet50" else "transformers"):
        if importlib.util.find_spec(module) is None:
            fail("the Python package %s is not installed for %s" % (module, sys.executable), 2)
    import torch

    if not torch.cuda.is_available():
        fail("torch %s sees no CUDA device" % torch.__version__, 2)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    os.makedirs(args.out, exist_ok=True)
    capped = cap(torch, dev, args.cap_gib)
    {"ring": ring, "sweep": sweep, "one": one}[args.mode](torch, dev, args, capped)


if __name__ == "__main__":
    main()
