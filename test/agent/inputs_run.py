"""Steps of different input shapes with the real agent on the torch and hook doubles
(torch_double.py, test/support/hook_double.c): each step's forward makes an activation of
batch x seq x 1024 floats (and, with --quadratic, an attention-like batch x 16 x seq x seq), which
backward frees; the program caps the allocator with set_per_process_memory_fraction before its
first step. The ring says each step's input and the limit; test/agent/inputs.test.ts replays it.

    GPUMEM_TEST_HOOK_DOUBLE=LIB GPUMEM_TUI_DIR=DIR python3 test/agent/inputs_run.py OUT.ring [--quadratic]

Prints its pid, then one JSON line: the records saved, the shapes fed, the fraction and the device's total.
"""
import argparse
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))
import torch_double  # noqa: E402

torch = torch_double.install()
TOTAL = 80 << 30
fractions = []
# What the double's torch.cuda lacks of the real one's, before the agent wraps it.
torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(name="double", uuid=None, total_memory=TOTAL)
torch.cuda.set_per_process_memory_fraction = lambda fraction, device=None: fractions.append((fraction, device))
torch.cuda.current_device = lambda: 0

import gpumem_agent  # noqa: E402


ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--quadratic", action="store_true")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seqs", help="each step's sequence length, comma separated (default: seven lengths)")
ap.add_argument("--leak", action="store_true", help="keep every step's activation (batch x seq x 1024 floats) in a list: memory held at step boundaries grows")
ap.add_argument("--fraction", type=float, default=0.25, help="the cap set with set_per_process_memory_fraction")
ap.add_argument("--keep-output", action="store_true", help="forward also returns logits (batch x seq x 2048 floats), which the loop holds until the next forward returns")
args = ap.parse_args()

agent = torch_double.start_agent_on_doubles(torch)
print("pid %d" % os.getpid(), flush=True)  # for run --json's tests (test/support/run-json.ts)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(1024, 256)

    def forward(self, x):
        b, s = x.shape
        hidden = torch.empty(b, s, 1024)  # activations: linear in the tokens
        if args.leak:
            kept.append(hidden)
        attn = torch.empty(b, 16, s, s) if args.quadratic else None  # attention weights: quadratic in seq
        loss = torch.empty(1)
        loss.requires_grad = True
        model = self

        def backward():
            nonlocal hidden, attn
            model.weight.grad = torch.empty(*model.weight.shape)
            hidden = attn = None

        loss._backward = backward
        return (loss, torch.empty(b, s, 2048)) if args.keep_output else loss


class SGD(torch.optim.Optimizer):
    def _step(self):
        for p in self.param_groups[0]["params"]:
            self.state.setdefault(p, {"momentum": torch.empty(*p.shape)})


FRACTION = args.fraction
kept = []  # --leak
torch.cuda.set_per_process_memory_fraction(FRACTION)
model = Model()
opt = SGD(model.parameters())
seqs = [int(s) for s in args.seqs.split(",")] if args.seqs else [64, 32, 128, 96, 48, 128, 80, 32, 112, 64]
out = None
for seq in seqs:
    x = torch.empty(args.batch, seq)
    out = model(x)  # --keep-output: the last step's logits stay alive until this returns
    torch.autograd.backward(out[0] if args.keep_output else out)
    opt.step()
    opt.zero_grad(set_to_none=True)
    del x
    if not args.keep_output:
        out = None
records = gpumem_agent.save_ring(args.out)
print(json.dumps({"records": records, "batch": args.batch, "seqs": seqs, "fraction": FRACTION, "total": TOTAL, "fractions_seen": fractions, "notes": agent.notes}), flush=True)
