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
    def _build(self):  # the hook double, where the agent would build the hook against torch's headers
        self._built = (os.environ["GPUMEM_TEST_HOOK_DOUBLE"], None)


ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=14)
ap.add_argument("--wait-before", type=float, default=0)
ap.add_argument("--sigkill", action="store_true")
args = ap.parse_args()

agent = gpumem_agent._agent = AgentOnDouble(torch)
agent.start()
if agent.mode != "hook":
    sys.exit("the agent did not take the hook double: %s" % agent.hook_error)


class Linear(torch.nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.weight = torch.nn.Parameter(rows, cols)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = Linear(4096, 256)  # 4 MiB
        self.h0 = Linear(512, 512)  # 1 MiB
        self.lm_head = Linear(1024, 256)  # 1 MiB

    def forward(self, x):
        hidden = torch.empty(64, 4096)  # activations, freed by backward
        loss = torch.empty(1)

        def backward():
            nonlocal hidden
            for p in self.parameters():
                p.grad = torch.empty(*p.shape)
            hidden = None

        loss._backward = backward
        return loss


class AdamW(torch.optim.Optimizer):
    def _step(self):
        for p in self.param_groups[0]["params"]:
            if p not in self.state:
                self.state[p] = {"exp_avg": torch.empty(*p.shape), "exp_avg_sq": torch.empty(*p.shape)}
        torch.empty(256, 256)  # a temporary of the step


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
