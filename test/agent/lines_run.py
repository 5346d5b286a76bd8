"""Programs whose findings must name the user's line (issue 37), on a CPU: the real agent with its
stacks on, torch and the allocator hook replaced by their doubles (test/agent/torch_double.py,
test/support/hook_double.c, whose walker is the hook's cuda/pystack.c), the ring saved for replay.

    GPUMEM_TEST_HOOK_DOUBLE=LIB PYTHONPATH=agent python3 test/agent/lines_run.py SCENARIO OUT.ring [--steps N]

  leak    keeps a 2 MiB tensor every step (line:keep)
  nograd  never calls zero_grad: each backward (line:backward) meets the gradients of the step
          before; the optimizer's step at line:optimizer
  oom     holds 24 MiB (line:hold), then asks for more than the double's limit (line:ask, caught)

--drop: after the steps, what the program kept is let go before it exits, as a training function's
locals are when it returns (test/gpu/lines_train.py's main): the monitor's last document then has
none of the kept blocks live.

Each statement whose line a test checks ends in a `line:NAME` comment. OUT.ring and OUT.json (the
manifest) are the agent's compact copy (gpumem_agent.save_ring).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_double  # noqa: E402

torch = torch_double.install()

import gpumem_agent  # noqa: E402


ap = argparse.ArgumentParser()
ap.add_argument("scenario", choices=("leak", "nograd", "oom"))
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--drop", action="store_true", help="after the steps, let go of what was kept")
ap.add_argument("--linger", type=float, default=0, help="after the steps, say so (OUT.trained) and stay alive this long")
args = ap.parse_args()

agent = torch_double.start_agent_on_doubles(torch)

print("pid %d" % os.getpid(), flush=True)
Model, AdamW = torch_double.toy_training(torch, lm_head=True, second_moment=True)
model = Model()  # line:model
opt = AdamW(model.parameters())
kept = []
for _ in range(args.steps):
    x = torch.empty(64, 256)
    loss = model(x)  # line:forward
    torch.autograd.backward(loss)  # line:backward
    opt.step()  # line:optimizer
    if args.scenario != "nograd":
        opt.zero_grad(set_to_none=True)
    if args.scenario == "leak":
        kept.append(torch.empty(512, 1024))  # line:keep
if args.scenario == "oom":
    hold = [torch.empty(1024, 1024) for _ in range(6)]  # line:hold
    torch_double._Allocator.limit = 64 << 20
    try:
        torch.empty(1 << 30)  # line:ask
    except torch.cuda.OutOfMemoryError:
        pass
    torch_double._Allocator.limit = None
if args.drop:
    del kept[:]
if args.linger > 0:
    import time

    with open(args.out + ".trained", "w") as f:
        f.write("%d\n" % os.getpid())
    time.sleep(args.linger)
print("records %d" % gpumem_agent.save_ring(args.out), flush=True)
