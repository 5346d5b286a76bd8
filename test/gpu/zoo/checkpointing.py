"""Activation checkpointing: GPT-2 (from a transformers config) with
model.gradient_checkpointing_enable() (torch.utils.checkpoint, non-reentrant), AdamW.

    python test/gpu/zoo/checkpointing.py --steps 800
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=800)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

config = gpt2_config(use_cache=False)
model = GPT2LMHeadModel(config).cuda()
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
say("checkpointing %s params %d" % (model.is_gradient_checkpointing, sum(p.numel() for p in model.parameters())))

gen = torch.Generator(device="cuda").manual_seed(1000)
for step in range(1, args.steps + 1):
    ids = torch.randint(0, config.vocab_size, (8, 256), device="cuda", generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        say("step %d loss %.4f" % (step, loss.item()))

report_totals()
