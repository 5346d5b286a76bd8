"""A few training steps with the real agent on the torch and hook doubles (torch_double.py,
test/support/hook_double.c), saving its ring where asked: the mark-every-hook mode
(GPUMEM_TUI_MARKS=hooks) on a CPU (test/agent/marks.test.ts).

    GPUMEM_TEST_HOOK_DOUBLE=LIB GPUMEM_TUI_DIR=DIR [GPUMEM_TUI_MARKS=hooks] \\
      python3 test/agent/marks_run.py OUT.ring [--steps N]

Saves OUT.ring and OUT.json (gpumem_agent.save_ring) and prints one JSON line: the sync points the
agent counted and its notes.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))
import torch_double  # noqa: E402

torch = torch_double.install()

import gpumem_agent  # noqa: E402


ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=3)
args = ap.parse_args()

agent = torch_double.start_agent_on_doubles(torch)
Model, AdamW = torch_double.toy_training(torch, second_moment=True, step_temporary=True)
model = Model()
opt = AdamW(model.parameters())
for _ in range(args.steps):
    with torch.profiler.record_function("train_step"):
        loss = model(torch.empty(64, 256))
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
records = gpumem_agent.save_ring(args.out)
print(json.dumps({"records": records, "sync_points": agent.marks.count if agent.marks else None, "notes": agent.notes}), flush=True)
