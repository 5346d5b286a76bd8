"""Programs whose findings must name the user's line (issue 37), each a few steps a user could have
written, run from the repository root on a GPU machine under the monitor with no variable set
(bench/gpu-parts/lines.sh):

    bun src/cli.ts run --json --output OUT/NAME.run.ndjson -- python3 test/gpu/lines_train.py SCENARIO --out OUT

  leak    a transformers GPT-2 (from a config, no download) with AdamW and zero_grad that keeps the
          last 8 positions' logits of every step (2 MiB a step, line:keep): the growth finding's line
  nograd  a torchvision ResNet50 whose optimizer's zero_grad is never called: the gradients kept
          finding's lines (line:backward makes the gradients, line:optimizer AdamW's state)
  oom     a GPT-2 trained a few steps, 24 GiB held (line:hold), then a request larger than the
          device (line:ask, caught), then the batch halved from one too large until a step fits
          (the model's call at line:forward or line:backward asks), then a few steps: the OOM
          findings' lines that asked and the lines holding most
  frag    a GPT-2 trained a few steps, then one 8 GiB segment cut into 200 MiB pieces (line:pieces),
          every other one freed, the cache emptied of every other segment, the process capped just
          above what it reserves, and 400 MiB asked
          (line:frag-ask, caught): an OOM that fragmentation made, whose free ranges the pieces'
          line left (reserved-unallocated), the pieces kept to the end

--attach-wait S: one warm-up step, "ready PID" on stdout, then steps until an agent appears (S
seconds at most; started without one, `gpumem-tui attach PID` puts it in), then --steps more.
--linger S: after the steps, stay alive S seconds (a monitor's `d` then dumps a live process).

Once done the program saves the agent's compact copy of its ring, OUT/NAME.ring and its manifest
OUT/NAME.json (gpumem_agent.save_ring), and OUT/NAME.facts.json: torch's figures, the scenario and
where each `line:NAME` mark of this file is (the file as Python names it in frames: the path it was
started with). --exit-ring: OUT/NAME.exit.ring (and .exit.json) too, saved once the training's
objects are let go, as a monitor reads the ring at the end of the run. Exit status 0; 3 where a step
failed; 5 where no agent wrote the ring.
"""
import argparse
import importlib.util
import json
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compile_graphs import ring_facts, torch_figures  # noqa: E402

MARK = re.compile(r"#.*\bline:([a-z-]+)")
GPT2 = dict(n_layer=4, n_embd=256, n_head=4, vocab_size=8192, n_positions=256)
GiB = 1 << 30


def marks():
    """{name: line} of every `line:NAME` mark in this file, and the file as frames name it."""
    with open(os.path.abspath(__file__)) as f:
        lines = {m.group(1): i + 1 for i, text in enumerate(f) for m in [MARK.search(text)] if m and "MARK" not in text}
    return {"filename": main.__code__.co_filename, "lines": lines}


def agent():
    """(the agent's module, the agent once its ring is there), else (module, None)."""
    mod = sys.modules.get("gpumem_agent")
    a = mod.current() if mod else None
    return mod, (a if a is not None and a.ring is not None else None)


class Gpt2:
    def __init__(self, torch, dev, keep):
        from transformers import GPT2Config, GPT2LMHeadModel

        self.torch, self.dev, self.keep = torch, dev, keep
        self.cfg = GPT2Config(**GPT2)
        self.model = GPT2LMHeadModel(self.cfg).to(dev)  # line:model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4)
        self.kept = []

    def step(self, batch=8):
        ids = self.torch.randint(0, self.cfg.vocab_size, (batch, 256), device=self.dev)
        out = self.model(input_ids=ids, labels=ids)  # line:forward
        out.loss.backward()  # line:backward
        self.opt.step()  # line:optimizer
        self.opt.zero_grad(set_to_none=True)
        if self.keep:
            self.kept.append(out.logits[:, -8:].detach().clone())  # line:keep
        return round(out.loss.item(), 4)


class ResNet:
    def __init__(self, torch, dev):
        import torchvision

        self.torch, self.dev = torch, dev
        self.model = torchvision.models.resnet50(weights=None).to(dev)  # line:resnet
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(8, 3, 224, 224, device=dev)
        self.y = torch.randint(0, 1000, (8,), device=dev)

    def step(self):
        loss = self.torch.nn.functional.cross_entropy(self.model(self.x), self.y)  # line:resnet-forward
        loss.backward()  # line:resnet-backward
        self.opt.step()  # line:resnet-optimizer
        # no zero_grad: every backward adds into the gradients kept from the step before
        return round(loss.item(), 4)


def oom_part(torch, dev, run, facts):
    """24 GiB held, a request larger than the device caught, then a batch too large halved until it fits."""
    hold = [torch.empty(8 * GiB, dtype=torch.uint8, device=dev) for _ in range(3)]  # line:hold
    total = torch.cuda.get_device_properties(dev).total_memory
    try:
        torch.empty(total, dtype=torch.uint8, device=dev)  # line:ask
        facts["ask_failed"] = False
    except torch.cuda.OutOfMemoryError:
        facts["ask_failed"] = True
    facts["held_bytes"] = sum(t.numel() for t in hold)
    del hold
    torch.cuda.empty_cache()
    batch, ooms = 4096, 0
    while batch >= 1:
        try:
            run.step(batch)
            break
        except torch.cuda.OutOfMemoryError:
            ooms += 1
        # Outside the except block: the failed step's tensors, held by the traceback until here, are gone.
        run.opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        batch //= 2
    facts.update({"batch_fits": batch, "batch_ooms": ooms})


HELD = []  # what a scenario keeps alive to the end


def frag_part(torch, dev, facts):
    """Holes of 200 MiB in one cached segment, and a request that no hole holds."""
    big = torch.empty(8 * GiB, dtype=torch.uint8, device=dev)
    del big  # its segment stays in the cache, whole
    pieces = [torch.empty(200 << 20, dtype=torch.uint8, device=dev) for _ in range(40)]  # line:pieces
    HELD.extend(pieces[::2])
    del pieces  # the odd ones freed: holes between the kept ones
    # Every other cached segment given back first: the first H200 run capped without this, and the
    # allocator's retry under the cap freed the training's cached segments and the 400 MiB fit (one
    # retry, no OOM). The 8 GiB segment is split, so it stays; its largest hole is 392 MiB (the last
    # piece's 200 and the segment's 192 left at its end).
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(dev).total_memory
    facts["frag_reserved_at_ask"] = torch.cuda.memory_reserved(dev)
    torch.cuda.set_per_process_memory_fraction(min(1.0, (facts["frag_reserved_at_ask"] + (64 << 20)) / total), dev)
    try:
        torch.empty(400 << 20, dtype=torch.uint8, device=dev)  # line:frag-ask
        facts["frag_ask_failed"] = False
    except torch.cuda.OutOfMemoryError:
        facts["frag_ask_failed"] = True
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    facts["frag_reserved"] = torch.cuda.memory_reserved(dev)
    facts["frag_allocated"] = torch.cuda.memory_allocated(dev)


def main():
    ap = argparse.ArgumentParser(description="programs whose findings must name the user's line")
    ap.add_argument("scenario", choices=("leak", "nograd", "oom", "frag"))
    ap.add_argument("--out", required=True, help="where NAME.{ring,json,facts.json} go")
    ap.add_argument("--name", help="the files' name (default: the scenario's)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--attach-wait", type=float, default=0)
    ap.add_argument("--linger", type=float, default=0)
    ap.add_argument("--exit-ring", action="store_true", help="save the ring again once the training is let go")
    args = ap.parse_args()
    name = args.name or args.scenario
    for module in ("torch", "torchvision" if args.scenario == "nograd" else "transformers"):
        if importlib.util.find_spec(module) is None:
            sys.exit("lines_train: the Python package %s is not installed for %s" % (module, sys.executable))
    import torch

    if not torch.cuda.is_available():
        sys.exit("lines_train: torch %s sees no CUDA device" % torch.__version__)
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    facts = {"scenario": args.scenario, "name": name, "marks": marks()}
    losses, error, waited = [], None, None
    t0 = time.time()
    try:
        run = ResNet(torch, dev) if args.scenario == "nograd" else Gpt2(torch, dev, keep=args.scenario == "leak")
        if args.attach_wait > 0:
            losses.append(run.step())
            print("ready %d" % os.getpid(), flush=True)
            end = time.time() + args.attach_wait
            while agent()[1] is None and time.time() < end:
                losses.append(run.step())
                time.sleep(0.05)
            waited = len(losses)
        for _ in range(args.steps):
            losses.append(run.step())
        if args.scenario == "oom":
            oom_part(torch, dev, run, facts)
            for _ in range(3):
                losses.append(run.step())
        if args.scenario == "frag":
            frag_part(torch, dev, facts)
        if args.linger > 0:
            # Said in a file too: under the monitor's screens the program's stdout is not seen.
            with open(os.path.join(args.out, name + ".trained"), "w") as f:
                f.write("%d\n" % os.getpid())
            print("trained %d" % os.getpid(), flush=True)
            time.sleep(args.linger)
    except Exception as e:
        traceback.print_exc()
        error = "%s at step %d: %s" % (type(e).__name__, len(losses) + 1, str(e).strip().splitlines()[:1])
    torch.cuda.synchronize()
    facts.update(torch_figures(torch, dev))
    facts.update({"steps_done": len(losses), "steps_before_attach": waited, "losses": losses, "error": error,
                  "seconds": round(time.time() - t0, 2)})
    mod, a = agent()
    if a is not None:
        facts["records"] = mod.save_ring(os.path.join(args.out, name + ".ring"))  # after the agent's sync
        facts.update(ring_facts(a))
        facts["notes"] = dict(a.notes)
        if args.exit_ring and error is None:
            # What a monitor reads at the end of a run: the training's objects let go (as main's
            # locals are when it returns, before the agent's exit), then the ring saved again. The
            # first H200 run's last `run --json` document came after that and its growth named no line.
            del run
            try:
                torch.cuda.synchronize()
                facts["memory_allocated_at_exit"] = torch.cuda.memory_allocated(dev)
                facts["records_at_exit"] = mod.save_ring(os.path.join(args.out, name + ".exit.ring"))
            except Exception as e:  # the main ring and facts stand without it
                facts["exit_ring_error"] = "%s: %s" % (type(e).__name__, e)
    else:
        facts.update({"records": None, "agent": "not attached"})
    with open(os.path.join(args.out, name + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print("lines_train %s: %d steps, allocated %d, peak %d, records %s, oom %s"
          % (name, len(losses), facts["memory_allocated"], facts["max_memory_allocated"], facts["records"],
             {k: facts.get(k) for k in ("ask_failed", "batch_fits", "batch_ooms", "frag_ask_failed")}), flush=True)
    if error is not None:
        sys.exit(3)
    if a is None:
        sys.exit(5)


if __name__ == "__main__":
    main()
