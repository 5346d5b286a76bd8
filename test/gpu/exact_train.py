"""A few training steps whose ring holds torch's own figures at every hook: the recordings of issue
36's comparison (the monitor's block model against torch at thousands of points inside steps).
Run under `gpumem-tui run` with the mark-every-hook mode (bench/gpu-session.sh part `exact`):

    GPUMEM_TUI_MARKS=hooks GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR=DIR \\
      bun src/cli.ts run --json --output OUT/NAME.run.ndjson -- \\
      python3 test/gpu/exact_train.py --model gpt2 --out OUT --name NAME [--steps 4]

--model:
  gpt2      transformers' GPT-2 from a config (6 layers, 512 wide, vocab 50,257), batch 16x256, AdamW
  resnet50  torchvision's ResNet50 (weights=None), batch 8x3x224x224, SGD with momentum
  compile   the gpt2 above under torch.compile(mode="reduce-overhead") (CUDA graphs), AdamW outside
  fsdp2     the gpt2 above, fully_shard per block then the model, on one rank (run under torchrun)

Once the steps are done the program saves the agent's compact copy of its ring, OUT/NAME.ring,
with its manifest OUT/NAME.json (gpumem_agent.save_ring: the monitor removes the live ring at exit),
and OUT/NAME.facts.json: torch's figures at the end (test/gpu/compile_graphs.py's fields, the
memory_stats whole), the sync points the agent wrote, the losses, the ring's counts.

--attach-wait S: started without the agent (test/gpu/exact_attach.py attaches to it): one warm-up
step, "ready PID" on stdout, then steps until the agent appears (S seconds at most), then --steps
more. Without the agent at the end the facts say so and the exit status is 5.

Exit status: 0; 2 where torch, transformers/torchvision or a CUDA device is missing; 3 where a step
failed (the facts say so); 5 where no agent wrote the ring.
"""
import argparse
import importlib.util
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compile_graphs import ring_facts, torch_figures  # noqa: E402  (the rings' facts fields, one definition)

GPT2 = dict(n_layer=6, n_embd=512, n_head=8, vocab_size=50257, n_positions=256)


def fail(message, code):
    sys.stderr.write("exact_train: %s\n" % message)
    sys.exit(code)


def gpt2(torch, dev):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(**GPT2)
    model = GPT2LMHeadModel(cfg).to(dev)
    batch = lambda: torch.randint(0, cfg.vocab_size, (16, 256), device=dev)  # noqa: E731
    loss = lambda m, x: m(input_ids=x, labels=x).loss  # noqa: E731
    return model, batch, loss


def resnet50(torch, dev):
    import torchvision

    model = torchvision.models.resnet50(weights=None).to(dev)
    target = torch.randint(0, 1000, (8,), device=dev)
    batch = lambda: torch.randn(8, 3, 224, 224, device=dev)  # noqa: E731
    loss = lambda m, x: torch.nn.functional.cross_entropy(m(x), target)  # noqa: E731
    return model, batch, loss


def fsdp2(torch, dev):
    import torch.distributed as dist

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=dev)
    model, batch, loss = gpt2(torch, dev)
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    return model, batch, loss


def build(torch, kind, dev):
    """(model to call, model whose parameters train, batch(), loss(model, x), optimizer)."""
    torch.manual_seed(0)
    model, batch, loss = {"gpt2": gpt2, "compile": gpt2, "resnet50": resnet50, "fsdp2": fsdp2}[kind](torch, dev)
    if kind == "resnet50":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    called = torch.compile(model, mode="reduce-overhead") if kind == "compile" else model
    return called, batch, loss, opt


def step(torch, kind, called, batch, loss, opt):
    from torch.profiler import record_function

    if kind == "compile":
        torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the last one's outputs may go
    with record_function("data"):
        x = batch()
    with record_function("train_step"):
        value = loss(called, x)
        value.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return round(value.item(), 4)


def agent():
    """(the agent's module, the agent once its ring is there and its hooks are in), else (module, None)."""
    mod = sys.modules.get("gpumem_agent")
    a = mod.current() if mod else None
    # The sync points' hooks go in after the ring (Agent._start): steps before them would have none.
    ready = a is not None and a.ring is not None and (getattr(a, "marks", None) is not None or "marks" in a.notes or a.mode != "hook")
    return mod, (a if ready else None)


def main():
    ap = argparse.ArgumentParser(description="a few training steps with torch's figures at every hook in the ring")
    ap.add_argument("--model", required=True, choices=("gpt2", "resnet50", "compile", "fsdp2"))
    ap.add_argument("--out", required=True, help="where NAME.{ring,json,facts.json} go")
    ap.add_argument("--name", help="the files' name (default: the model's)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--attach-wait", type=float, default=0, help="seconds to wait for an attach after one warm-up step")
    args = ap.parse_args()
    name = args.name or args.model
    need = {"resnet50": "torchvision"}.get(args.model, "transformers")
    for module in ("torch", need):
        if importlib.util.find_spec(module) is None:
            fail("the Python package %s is not installed for %s" % (module, sys.executable), 2)
    import torch

    if not torch.cuda.is_available():
        fail("torch %s sees no CUDA device" % torch.__version__, 2)
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    os.makedirs(args.out, exist_ok=True)
    losses, error, waited = [], None, None
    t0 = time.time()
    try:
        called, batch, loss, opt = build(torch, args.model, dev)
        if args.attach_wait > 0:
            losses.append(step(torch, args.model, called, batch, loss, opt))
            print("ready %d" % os.getpid(), flush=True)
            end = time.time() + args.attach_wait
            while agent()[1] is None and time.time() < end:
                losses.append(step(torch, args.model, called, batch, loss, opt))
                time.sleep(0.05)
            waited = len(losses)
        for _ in range(args.steps):
            losses.append(step(torch, args.model, called, batch, loss, opt))
    except Exception as e:
        traceback.print_exc()
        error = "%s at step %d: %s" % (type(e).__name__, len(losses) + 1, str(e).strip().splitlines()[:1])
    torch.cuda.synchronize()
    facts = torch_figures(torch, dev)
    facts["memory_stats"] = dict(torch.cuda.memory_stats(dev))
    facts.update({"scenario": name, "model": args.model, "steps_done": len(losses), "steps_before_attach": waited,
                  "losses": losses, "error": error, "seconds": round(time.time() - t0, 2),
                  "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                  "parameters": sum(p.numel() for p in called.parameters()) if error is None else None})
    mod, a = agent()
    if a is not None:
        facts["records"] = mod.save_ring(os.path.join(args.out, name + ".ring"))  # after the agent's sync
        facts.update(ring_facts(a))
        facts.update({"sync_points": a.marks.count if a.marks else None, "marks_note": a.notes.get("marks"), "notes": dict(a.notes)})
    else:
        facts.update({"records": None, "agent": "not attached"})
    with open(os.path.join(args.out, name + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print("exact_train %s: %d steps, losses %s, allocated %d, peak %d, reserved %d, records %s, sync points %s"
          % (name, len(losses), losses, facts["memory_allocated"], facts["max_memory_allocated"], facts["memory_reserved"],
             facts["records"], facts.get("sync_points")), flush=True)
    if args.model == "fsdp2":
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    if error is not None:
        fail("a step failed: %s" % error, 3)
    if a is None:
        fail("no agent wrote a ring (run it under gpumem-tui run, or attach to it)", 5)


if __name__ == "__main__":
    main()
