"""A short transformers GPT-2 training that ends right after its last step: the run whose final
document once showed its ranges as range#1 and range#2 (test/headless/run-final-names.test.ts).

    python3 test/gpu/hf_gpt2_short.py [--steps 14] [--batch 2 --seq 64]

The model is built from a config (no download). AdamW, zero_grad(set_to_none=True), the user's
record_function ranges "data" and "train_step". Prints "pid N" first.
"""
import argparse
import os

import torch
from torch.profiler import record_function
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser(description="A few steps of a GPT-2 from scratch on random tokens, then exit.")
ap.add_argument("--steps", type=int, default=14)
ap.add_argument("--batch", type=int, default=2)
ap.add_argument("--seq", type=int, default=64)
args = ap.parse_args()

print("pid %d" % os.getpid(), flush=True)
dev = torch.device("cuda", 0)
torch.manual_seed(0)
config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=256, n_layer=4, n_head=4)
model = GPT2LMHeadModel(config).to(dev)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(args.steps):
    with record_function("data"):
        ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=dev)
    with record_function("train_step"):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize(dev)
print("done %d steps, loss %.4f" % (args.steps, out.loss.item()), flush=True)
