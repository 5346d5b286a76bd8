"""Two GPUs in one process: GPT-2's blocks (from a transformers config) split between cuda:0 and
cuda:1, the hidden states handed from one to the other (naive model parallelism), AdamW.

    python test/gpu/zoo/two_gpus.py --steps 800
"""
import argparse
import sys

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=800)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

if torch.cuda.device_count() < 2:
    sys.exit("two_gpus.py needs two GPUs; torch sees %d" % torch.cuda.device_count())

config = gpt2_config(tie_word_embeddings=False)  # the head lives on the second GPU, the embedding on the first
model = GPT2LMHeadModel(config)
t = model.transformer
half = len(t.h) // 2
first = [t.wte, t.wpe, t.drop, *t.h[:half]]
second = [*t.h[half:], t.ln_f, model.lm_head]
for m in first:
    m.to("cuda:0")
for m in second:
    m.to("cuda:1")
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
say("two gpus: blocks 0..%d on cuda:0, %d..%d on cuda:1" % (half - 1, half, len(t.h) - 1))


def blocks(h, bs):
    for b in bs:
        out = b(h)
        h = out[0] if isinstance(out, tuple) else out
    return h


def forward(ids):
    pos = torch.arange(ids.shape[1], device=ids.device)
    h = t.drop(t.wte(ids) + t.wpe(pos))
    h = blocks(h, t.h[:half]).to("cuda:1")
    h = t.ln_f(blocks(h, t.h[half:]))
    return model.lm_head(h)


gen = torch.Generator(device="cuda:0").manual_seed(1000)
for step in range(1, args.steps + 1):
    ids = torch.randint(0, config.vocab_size, (8, 128), device="cuda:0", generator=gen)
    logits = forward(ids)
    labels = ids.to("cuda:1")
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        say("step %d loss %.4f" % (step, loss.item()))

report_totals()
