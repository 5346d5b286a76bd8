"""A leak: GPT-2 (from a transformers config) training that keeps every step's logits in a list
"for later" (a slice of them, detached: the whole logits tensor stays alive). Memory grows every
step; the monitor should say so.

    python test/gpu/zoo/leak.py --steps 400
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

config = gpt2_config()
model = GPT2LMHeadModel(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
gen = torch.Generator(device="cuda").manual_seed(1000)
kept = []
for step in range(1, args.steps + 1):
    ids = torch.randint(0, config.vocab_size, (8, 128), device="cuda", generator=gen)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    kept.append(out.logits[:, -1].detach())  # the last position's logits, kept for later
    if step % 100 == 0 or step == args.steps:
        say("step %d loss %.4f kept %d" % (step, out.loss.item(), len(kept)))

report_totals()
