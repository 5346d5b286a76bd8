"""torch.compile on a GPT-2 training (from a transformers config): the default mode, or
"reduce-overhead" (CUDA graphs), AdamW outside the compiled region.

    python test/gpu/zoo/compiled.py --mode default --steps 1000
    python test/gpu/zoo/compiled.py --mode reduce-overhead --steps 1000
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="default", choices=["default", "reduce-overhead"])
ap.add_argument("--steps", type=int, default=1000)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

config = gpt2_config()
model = GPT2LMHeadModel(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
step_fn = torch.compile(model, mode=args.mode)
say("compile mode %s params %d" % (args.mode, sum(p.numel() for p in model.parameters())))

gen = torch.Generator(device="cuda").manual_seed(1000)
for step in range(1, args.steps + 1):
    if args.mode == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the graphs' outputs may be reused
    ids = torch.randint(0, config.vocab_size, (8, 128), device="cuda", generator=gen)
    loss = step_fn(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        say("step %d loss %.4f" % (step, loss.item()))

report_totals()
