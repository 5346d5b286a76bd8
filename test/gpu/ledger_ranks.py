"""A DDP job whose rank 0 holds more memory outside PyTorch than the others, for the job view's
standout note (bench/gpu-parts/ledger-screens.sh, two GPUs or more, under torchrun): every rank
trains a small MLP under DDP; every rank calls new_group([0]) --groups times (new_group is
collective), and only rank 0 runs an all_reduce in each, so NCCL makes those communicators (and
their buffers) on rank 0 alone; rank 0 also allocates --raw-mib through a raw cudaMalloc (ctypes,
the libcudart torch loaded: test/gpu/ledger_prog.py raw_malloc), unmarked, as a library allocating
on its own does (single-rank communicators may hold little). Writes --out/ranks.facts.RANK.json:
torch's reserved and NVML's used of the rank before and after each."""
import argparse
import json
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--seconds", type=float, default=20.0)
ap.add_argument("--groups", type=int, default=3)
ap.add_argument("--raw-mib", type=int, default=512)
a = ap.parse_args()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank = int(os.environ["RANK"])
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
dist.init_process_group("nccl", device_id=dev)


def nvml_used():
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(local)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return p.usedGpuMemory
    except Exception:
        return None
    return None


model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 2048)).to(dev)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters())
facts = {"rank": rank, "pid": os.getpid(), "events": []}


def note(name):
    torch.cuda.synchronize()
    facts["events"].append({"name": name, "t": time.time(), "reserved": torch.cuda.memory_reserved(), "nvml_used": nvml_used()})


def step():
    x = torch.randn(64, 2048, device=dev)
    loss = ddp(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
note("before_groups")
groups = [dist.new_group([0]) for _ in range(a.groups)]
if rank == 0:
    for g in groups:
        t = torch.ones(1 << 20, device=dev)
        dist.all_reduce(t, group=g)
note("after_groups")
raw = None
if rank == 0 and a.raw_mib > 0:
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ledger_prog import raw_malloc  # noqa: E402

    raw = raw_malloc(a.raw_mib << 20)
    note("after_raw")
end = time.time() + a.seconds
while time.time() < end:
    step()
note("end")
with open(os.path.join(a.out, "ranks.facts.%d.json" % rank), "w") as f:
    json.dump(facts, f)
dist.barrier()
if raw is not None:
    raw[1]()
dist.destroy_process_group()
