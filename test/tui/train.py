"""A training run for the monitor's end-to-end checks on a GPU: a small transformer for SECONDS
seconds (default 40), with a record_function range.

    python3 test/tui/train.py [SECONDS]

Every 20 steps one line with torch's own numbers, for comparison with the monitor's:

    step 40 loss 2.3026 step_ms 11.482 allocated 52428800 reserved 104857600 max_allocated 98566144 t 1795380120.123

step_ms is the mean wall time of the last 20 steps (the GPU synchronized at each line); the byte
figures are torch.cuda.memory_allocated / memory_reserved / max_memory_allocated at the step
boundary; t is the Unix time of the line. Signals:
  SIGUSR1  at the next step boundary, ask for 16 TiB (an OOM, caught), then go on training:
           prints `oom raised num_ooms N t T`
  SIGTERM  stop at the next step boundary and print the `done` line (as when SECONDS have passed)
"""
import os
import signal
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 40
dev = torch.device("cuda:0")
torch.manual_seed(0)
layer = lambda: torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
m = torch.nn.Sequential(*[layer() for _ in range(4)], torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randn(32, 128, 256, device=dev)
y = torch.randint(0, 10, (32 * 128,), device=dev)
OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

flags = {"oom": False, "stop": False}
signal.signal(signal.SIGUSR1, lambda *_: flags.__setitem__("oom", True))
signal.signal(signal.SIGTERM, lambda *_: flags.__setitem__("stop", True))
print("pid", os.getpid(), "torch", torch.__version__, flush=True)

end = time.time() + seconds
step = 0
last = time.perf_counter()
while time.time() < end and not flags["stop"]:
    with torch.profiler.record_function("train_step"):
        loss = torch.nn.functional.cross_entropy(m(x).reshape(-1, 10), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step += 1
    if step % 20 == 0:
        value = float(loss)  # synchronizes: the 20 steps are done on the GPU too
        now = time.perf_counter()
        print(
            "step", step, "loss", "%.4f" % value, "step_ms", "%.3f" % ((now - last) / 20 * 1000),
            "allocated", torch.cuda.memory_allocated(dev), "reserved", torch.cuda.memory_reserved(dev),
            "max_allocated", torch.cuda.max_memory_allocated(dev), "t", "%.3f" % time.time(), flush=True,
        )
        last = time.perf_counter()
    if flags["oom"]:
        flags["oom"] = False
        try:
            torch.empty(1 << 44, dtype=torch.uint8, device=dev)  # 16 TiB
            print("oom not raised", flush=True)
        except OOM:
            print("oom raised num_ooms", torch.cuda.memory_stats(dev).get("num_ooms", 0), "t", "%.3f" % time.time(), flush=True)
print("done", step, "steps; allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved(), flush=True)
