"""DDP: GPT-2 (from a transformers config) under DistributedDataParallel, AdamW, on every GPU.

    torchrun --standalone --nproc-per-node=2 test/gpu/zoo/ddp.py --steps 800
"""
import argparse
import os

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=800)
args = ap.parse_args()

torch = deterministic(0)
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import GPT2LMHeadModel

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local_rank)
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)
rank, world = dist.get_rank(), dist.get_world_size()

config = gpt2_config()
model = DistributedDataParallel(GPT2LMHeadModel(config).to(dev), device_ids=[local_rank])
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
if rank == 0:
    say("ddp world %d params %d" % (world, sum(p.numel() for p in model.parameters())))

gen = torch.Generator(device=dev).manual_seed(1000 + rank)
for step in range(1, args.steps + 1):
    ids = torch.randint(0, config.vocab_size, (8, 128), device=dev, generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0:
            say("step %d loss %.4f" % (step, mean.item()))

dist.destroy_process_group()
report_totals()
