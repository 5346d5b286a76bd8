"""A training with the real agent, its real control socket and every verb it answers, for the
protocol's tests on a CPU (test/collect/protocol.test.ts): torch and the allocator hook are the
doubles (test/agent/torch_double.py, test/support/hook_double.c), with the few calls of torch's
the verbs make beyond the double's (reserved bytes, empty_cache, peaks, memory history and its
snapshot) kept here. Runs a few steps, prints "ready SOCKET", then steps on until stdin closes.

    GPUMEM_TEST_HOOK_DOUBLE=LIB GPUMEM_TUI_DIR=DIR PYTHONPATH=agent python3 test/agent/protocol_target.py
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_double  # noqa: E402

torch = torch_double.install()


live = {}  # address -> (block size, requested): what the pretend allocator holds
alloc0, free0 = torch_double._Allocator.alloc.__func__, torch_double._Allocator.free
history = {"on": False}


def alloc(cls, nbytes):
    address, size = alloc0(cls, nbytes)
    live[address] = (size, nbytes)
    return address, size


def free(address, size):
    live.pop(address, None)
    free0(address, size)


def snapshot():
    """torch.cuda.memory._snapshot()'s layout: one segment around the live blocks; a trace only
    while history is on (this double records none: an empty list, as torch's after a reset)."""
    blocks = [{"address": a, "size": s, "requested_size": r, "state": "active_allocated", "frames": []} for a, (s, r) in sorted(live.items())]
    lo = min(live) if live else 0x7F0000000000
    hi = max(a + s for a, (s, _) in live.items()) if live else lo
    segment = {"device": 0, "address": lo, "total_size": hi - lo, "allocated_size": sum(s for s, _ in live.values()), "stream": 0,
               "segment_type": "large", "is_expandable": False, "frames": [], "blocks": blocks}
    return {"segments": [segment], "device_traces": [[]] if history["on"] else []}


def record_memory_history(enabled, stacks="python", max_entries=0):
    history["on"] = enabled is not None


torch_double._Allocator.alloc = classmethod(alloc)
torch_double._Allocator.free = staticmethod(free)
torch.cuda.memory_reserved = lambda device=None: sum(s for s, _ in live.values())
torch.cuda.empty_cache = lambda: None
torch.cuda.reset_peak_memory_stats = lambda device=None: None
torch.cuda.memory = torch_double._module("torch.cuda.memory", _snapshot=snapshot, _record_memory_history=record_memory_history)


agent = torch_double.start_agent_on_doubles(torch)


Model, AdamW = torch_double.toy_training(torch)

model = Model()
opt = AdamW(model.parameters())
stop = threading.Event()


def step():
    loss = model(torch.empty(64, 256))
    torch.autograd.backward(loss)
    opt.step()
    opt.zero_grad(set_to_none=False)


for _ in range(3):
    step()
print("ready %s" % agent.sock_path, flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.is_set():  # steps go on: `names` with at_step waits for the next one
    step()
    time.sleep(0.02)
