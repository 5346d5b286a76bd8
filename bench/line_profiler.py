"""The line profiler's cost, side by side with pytorch_memlab's documented approach, on a GPU.

    python3 bench/line_profiler.py [OUT_DIR]       (PYTHONPATH=agent; writes line_profiler.json/.md)

One training step of a small transformer (many short lines: the case where a per-line cost shows),
timed three ways in interleaved rounds: undecorated; @gpumem_agent.profile (a LINE callback that
notes the ring's write index, records split after the call); and memlab's way, a trace function that
calls torch.cuda.memory_stats() and reset_peak_memory_stats() at every line. Medians of the rounds.
"""
import json
import os
import statistics
import sys
import time

import torch

import gpumem_agent

gpumem_agent.attach()
dev = torch.device("cuda:0")
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).to(dev)
opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
x = torch.randn(8, 64, 256, device=dev)


def step():
    out = layer(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


plain = step
ours = gpumem_agent.profile(step)


def memlab_style(fn):
    """What pytorch_memlab's LineProfiler does per line: read memory_stats, reset the peaks."""
    code = fn.__code__

    def local(frame, event, arg):
        if event == "line":
            torch.cuda.memory_stats()
            torch.cuda.reset_peak_memory_stats()
        return local

    def glob(frame, event, arg):
        return local if frame.f_code is code else None

    def wrapper():
        old = sys.gettrace()
        sys.settrace(glob)
        try:
            return fn()
        finally:
            sys.settrace(old)

    return wrapper


theirs = memlab_style(step)
variants = {"none": plain, "gpumem_agent.profile": ours, "memlab-style (memory_stats per line)": theirs}
CALLS, ROUNDS = 20, 25
for fn in variants.values():  # warm up
    for _ in range(5):
        fn()
torch.cuda.synchronize()
times = {k: [] for k in variants}
for r in range(ROUNDS):
    for name in (list(variants) if r % 2 == 0 else list(reversed(list(variants)))):
        fn = variants[name]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        times[name].append((time.perf_counter() - t0) / CALLS * 1e6)
med = {k: statistics.median(v) for k, v in times.items()}
base = med["none"]
result = {
    "command": "PYTHONPATH=agent python3 bench/line_profiler.py",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "device": torch.cuda.get_device_name(0),
    "torch": torch.__version__,
    "python": sys.version.split()[0],
    "mode": gpumem_agent.current().mode,
    "calls_per_round": CALLS,
    "rounds": ROUNDS,
    "median_us_per_step": {k: round(v, 1) for k, v in med.items()},
    "added_percent": {k: round((v / base - 1) * 100, 1) for k, v in med.items()},
    "min_us_per_step": {k: round(min(v), 1) for k, v in times.items()},
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "line_profiler.json"), "w") as f:
    json.dump(result, f, indent=1)
rows = "\n".join("| %s | %.1f | %+.1f%% | %.1f |" % (k, med[k], result["added_percent"][k], result["min_us_per_step"][k]) for k in variants)
md = """# Line profiler overhead

Command: `%s` (%s; %s, torch %s, Python %s, hook mode: %s).
One training step of a TransformerEncoderLayer(256, 4, 1024) on a batch of 8×64, decorated three
ways; %d interleaved rounds of %d steps; medians.

| variant | µs per step (median) | added | µs per step (min) |
| --- | ---: | ---: | ---: |
%s
""" % (result["command"], result["date"], result["device"], result["torch"], result["python"], result["mode"], ROUNDS, CALLS, rows)
with open(os.path.join(out, "line_profiler.md"), "w") as f:
    f.write(md)
print(md)
