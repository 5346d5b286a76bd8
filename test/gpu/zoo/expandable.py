"""Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, set by whoever starts it):
GPT-2 (from a transformers config) trained on batches of varying length, the case they are for.

    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python test/gpu/zoo/expandable.py --steps 1000
"""
import argparse
import os

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1000)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

config = gpt2_config()
model = GPT2LMHeadModel(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
say("PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))

gen = torch.Generator(device="cuda").manual_seed(1000)
lengths = [64, 256, 96, 192, 128, 224, 160, 32]
for step in range(1, args.steps + 1):
    seq = lengths[step % len(lengths)]
    ids = torch.randint(0, config.vocab_size, (8, seq), device="cuda", generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        say("step %d seq %d loss %.4f" % (step, seq, loss.item()))

report_totals()
