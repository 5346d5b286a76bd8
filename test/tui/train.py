"""A training run for the monitor's end-to-end check on a GPU: a small transformer for SECONDS
seconds (default 40), with a record_function range, printing one line per 20 steps."""
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
end = time.time() + seconds
step = 0
while time.time() < end:
    with torch.profiler.record_function("train_step"):
        loss = torch.nn.functional.cross_entropy(m(x).reshape(-1, 10), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step += 1
    if step % 20 == 0:
        print("step", step, "loss", float(loss), flush=True)
print("done", step, "steps; allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved(), flush=True)
