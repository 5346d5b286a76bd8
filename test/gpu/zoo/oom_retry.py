"""An out-of-memory error caught and retried, as a user finds the batch that fits:
first grabbing 1 GiB blocks until torch.cuda.OutOfMemoryError (caught, all freed), then a GPT-2
step (from a transformers config) at a batch too large for the GPU, halved until a step fits, and
a few steps of training at that batch. Exits 0.

    python test/gpu/zoo/oom_retry.py --steps 300
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=300)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

# 1. Take the GPU's memory a block at a time until it says no.
blocks = []
try:
    while True:
        blocks.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    say("filling: out of memory caught")
blocks.clear()
torch.cuda.empty_cache()

# 2. The largest batch that fits, from one that cannot.
config = gpt2_config()
model = GPT2LMHeadModel(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
gen = torch.Generator(device="cuda").manual_seed(1000)
seq = 256


def train_step(batch):
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda", generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


batch, ooms = 8192, 0
while True:
    try:
        loss = train_step(batch)
        break
    except torch.cuda.OutOfMemoryError:
        ooms += 1
    # Outside the except block: the failed step's tensors, held by the traceback until here, are gone.
    opt.zero_grad(set_to_none=True)
    torch.cuda.empty_cache()
    batch //= 2
say("batch %d fits after %d out-of-memory errors" % (batch, ooms))
batch = min(batch, 16)  # then train at an ordinary batch, as a user would once it is known to fit
for step in range(1, args.steps + 1):
    loss = train_step(batch)
    if step % 50 == 0 or step == args.steps:
        say("step %d loss %.4f" % (step, loss.item()))

report_totals()
