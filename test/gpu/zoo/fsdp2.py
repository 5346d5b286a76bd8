"""FSDP2: GPT-2 (from a transformers config) sharded block by block with
torch.distributed.fsdp.fully_shard, AdamW, on every GPU of the machine.

    torchrun --standalone --nproc-per-node=2 test/gpu/zoo/fsdp2.py --steps 400
"""
import argparse
import os

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
args = ap.parse_args()

torch = deterministic(0)
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import GPT2LMHeadModel

local_rank = int(os.environ.get("LOCAL_RANK", "0"))
dev = torch.device("cuda", local_rank)
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)
rank, world = dist.get_rank(), dist.get_world_size()

config = gpt2_config()
model = GPT2LMHeadModel(config).to(dev)  # the same initial weights on every rank (same seed)
for block in model.transformer.h:
    fully_shard(block)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
if rank == 0:
    say("fsdp2 world %d params %d" % (world, sum(p.numel() for p in model.parameters())))

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
