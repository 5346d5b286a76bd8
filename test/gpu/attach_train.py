"""A transformers GPT-2 training started with plain `python` (no agent, no `run`): the program
`gpumem-tui attach PID` is pointed at in test/gpu/attach_gpt2.py.

    python3 test/gpu/attach_train.py --facts F.jsonl --control DIR [--leak] [--steps N]

The model is built from a config (no download): 6 layers, d=512, batch 8x256, AdamW, the user's
record_function ranges "data" and "train_step". After every optimizer step (before zero_grad) one
line goes to F: {"step", "memory_allocated", "memory_reserved", "requested_bytes", "step_ms",
"time"}, torch's own figures from one memory_stats() call. While the file DIR/pause exists the
loop stands still after its step (the GPU synchronized, so the allocator's state is fixed), and
writes {"paused": true, "step", ...the figures} once: a monitor's document then compares exactly.
--leak keeps every step's last-position logits on the GPU (growth of 8 x 50257 x 4 bytes a step).
"""
import argparse
import json
import os
import time

import torch
from torch.profiler import record_function
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--facts", required=True)
ap.add_argument("--control", required=True)
ap.add_argument("--steps", type=int, default=100000)
ap.add_argument("--leak", action="store_true")
args = ap.parse_args()

dev = torch.device("cuda", 0)
torch.manual_seed(0)
config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=512, n_layer=6, n_head=8)
model = GPT2LMHeadModel(config).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
facts = open(args.facts, "w", buffering=1)
pause = os.path.join(args.control, "pause")


def figures():
    s = torch.cuda.memory_stats(dev)
    return {"memory_allocated": s.get("allocated_bytes.all.current", 0), "memory_reserved": s.get("reserved_bytes.all.current", 0),
            "requested_bytes": s.get("requested_bytes.all.current", 0), "time": time.time()}


print("attach_train pid %d" % os.getpid(), flush=True)
kept = []
t0 = time.perf_counter()
for step in range(1, args.steps + 1):
    with record_function("data"):
        ids = torch.randint(0, 50257, (8, 256), device=dev)
    with record_function("train_step"):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        torch.cuda.synchronize(dev)  # the step's time is the GPU's too; the figures are settled
        t1 = time.perf_counter()
        facts.write(json.dumps(dict(step=step, step_ms=(t1 - t0) * 1000, **figures())) + "\n")
        t0 = t1
        opt.zero_grad(set_to_none=True)
    if args.leak:
        kept.append(out.logits[:, -1].detach().clone())
    if os.path.exists(pause):
        del out
        torch.cuda.synchronize(dev)
        facts.write(json.dumps(dict(paused=True, step=step, **figures())) + "\n")
        while os.path.exists(pause):
            time.sleep(0.05)
        t0 = time.perf_counter()
