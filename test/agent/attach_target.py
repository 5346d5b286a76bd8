"""A training started without the agent, for attach tests on a CPU (torch and the allocator hook
are the doubles: test/agent/torch_double.py, test/support/hook_double.c). Its model and optimizer
state exist before any attach (the hook double drops events while no ring is attached, as the
allocator's tracker does before the hook). Where H1's injector would run the bootstrap, a thread of
the program calls gpumem_agent.attach_running(TOKEN) whenever a token appears in --tokens DIR
(a file named attach-N, taken once): the call the bootstrap makes. A token named attach-N.json
holds options: {"claimed": true} removes it first, as the bootstrap does; monitor_pid and
monitor_start are passed on.

    GPUMEM_TEST_HOOK_DOUBLE=LIB PYTHONPATH=agent python3 test/agent/attach_target.py --tokens DIR
        [--steps N] [--step-seconds S] [--no-torch] [--no-cuda] [--start-after K] [--linger S]

Prints "pid N" once ready, then "step K" after every step, and "attached RESULT" after each call.
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", required=True)
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--step-seconds", type=float, default=0.02)
ap.add_argument("--no-torch", action="store_true", help="torch never imported: the attach must refuse")
ap.add_argument("--no-cuda", action="store_true", help="CUDA not initialized: the attach must refuse")
ap.add_argument("--start-after", type=int, default=0, help="wait for a token at this step before going on (steps start once attached)")
ap.add_argument("--linger", type=float, default=0, help="after the last step: print the allocator's live bytes, stay this long")
args = ap.parse_args()

import gpumem_agent  # noqa: E402
from gpumem_agent import attaching as attach  # noqa: E402

live = {}  # address -> size: what the pretend allocator holds, for memory_snapshot()
_out = threading.Lock()


def say(line):
    """One whole line: the bootstrap's thread and the training's print at once."""
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

if not args.no_torch:
    import torch_double  # noqa: E402

    torch = torch_double.install()
    alloc0, free0 = torch_double._Allocator.alloc.__func__, torch_double._Allocator.free

    # The allocator's mutex: its events and the state a snapshot reads change together.
    mutex = threading.RLock()

    def alloc(cls, nbytes):
        with mutex:
            address, size = alloc0(cls, nbytes)
            live[address] = (size, nbytes)
        return address, size

    def free(address, size):
        with mutex:
            live.pop(address, None)
            free0(address, size)

    torch_double._Allocator.alloc = classmethod(alloc)
    torch_double._Allocator.free = staticmethod(free)

    def memory_snapshot():
        # One segment around every live block, as torch's snapshot lists them.
        with mutex:
            return _snapshot()

    def _snapshot():
        blocks = [{"address": a, "size": s, "requested_size": r, "state": "active_allocated"} for a, (s, r) in sorted(live.items())]
        lo = min(live) if live else 0x7F0000000000
        hi = max(a + s for a, (s, _) in live.items()) if live else lo
        return [{"device": 0, "address": lo, "total_size": hi - lo, "stream": 0, "is_expandable": False, "blocks": blocks}]

    torch.cuda.memory_snapshot = memory_snapshot
    if args.no_cuda:
        torch.cuda.is_initialized = lambda: False

    # The hook double where the agent would build the hook against torch's headers.
    attach.AttachedAgent._build = torch_double.hook_double_build


def bootstrap():
    """What the bootstrap's thread does: attach_running(token) for each token that appears."""
    seen = set()
    while True:
        for name in sorted(os.listdir(args.tokens)):
            path = os.path.join(args.tokens, name)
            if name.startswith("attach-") and not name.endswith(".error") and path not in seen and os.path.exists(path):
                seen.add(path)
                with open(path) as f:
                    opts = json.load(f) if name.endswith(".json") else {}
                if opts.get("claimed"):
                    os.unlink(path)  # as the bootstrap does: claimed before the call
                a = gpumem_agent.attach_running(path, monitor_pid=opts.get("monitor_pid"), monitor_start=opts.get("monitor_start"))
                say("attached %s" % (a.manifest_path if a else None))
        time.sleep(0.02)


threading.Thread(target=bootstrap, daemon=True).start()
say("pid %d" % os.getpid())
if args.no_torch:
    time.sleep(args.steps * args.step_seconds)
    sys.exit(0)


Model, AdamW = torch_double.toy_training(torch, second_moment=True, step_temporary=True)

model = Model()
opt = AdamW(model.parameters())
for step in range(args.steps):
    with torch.profiler.record_function("train_step"):
        x = torch.empty(64, 256)
        loss = model(x)
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
    say("step %d" % step)
    time.sleep(args.step_seconds)
    if step == args.start_after - 1:
        while gpumem_agent.current() is None:
            time.sleep(0.01)
say("done %d %d" % (sum(s for s, _ in live.values()), len(live)))
time.sleep(args.linger)
