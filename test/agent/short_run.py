"""A training of a few steps that ends at once, with record_function ranges "data" and
"train_step", for the end of a run (test/headless/run-final-names.test.ts). The real agent is
attached and closed at exit as in any program; torch and the allocator hook are the doubles
(test/agent/torch_double.py, test/support/hook_double.c), so it runs on a CPU.

    GPUMEM_TEST_HOOK_DOUBLE=LIB PYTHONPATH=agent python3 test/agent/short_run.py [--steps N]
        [--wait-before S] [--sigkill]

--wait-before S: sleep S seconds after attaching, before the first step (a monitor sees the agent
alive); --sigkill: end by SIGKILL after the last step (no atexit: the agent cannot close).
Prints the agent's pid and files on stdout.
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_double  # noqa: E402

torch = torch_double.install()

import gpumem_agent  # noqa: E402
from gpumem_agent.agent import Agent  # noqa: E402


class AgentOnDouble(Agent):
    _build = torch_double.hook_double_build


ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=14)
ap.add_argument("--wait-before", type=float, default=0)
ap.add_argument("--sigkill", action="store_true")
args = ap.parse_args()

agent = gpumem_agent._agent = AgentOnDouble(torch)
agent.start()
if agent.mode != "hook":
    sys.exit("the agent did not take the hook double: %s" % agent.hook_error)


Model, AdamW = torch_double.toy_training(torch, lm_head=True, second_moment=True, step_temporary=True)

model = Model()
opt = AdamW(model.parameters())
print("pid %d ring %s manifest %s" % (os.getpid(), agent.ring_path, agent.manifest_path), flush=True)
time.sleep(args.wait_before)
for _ in range(args.steps):
    with torch.profiler.record_function("data"):
        x = torch.empty(64, 256)
    with torch.profiler.record_function("train_step"):
        loss = model(x)
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
if args.sigkill:
    os.kill(os.getpid(), signal.SIGKILL)
