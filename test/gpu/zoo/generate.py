"""generate() under torch.inference_mode: greedy decoding with GPT-2 (from a transformers config).

    python test/gpu/zoo/generate.py --rounds 40
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=40)
ap.add_argument("--new-tokens", type=int, default=64)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel

config = gpt2_config()
model = GPT2LMHeadModel(config).cuda().eval()
gen = torch.Generator(device="cuda").manual_seed(1000)
with torch.inference_mode():
    for r in range(1, args.rounds + 1):
        prompt = torch.randint(0, config.vocab_size - 1, (8, 32), device="cuda", generator=gen)
        out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=config.eos_token_id)
        new = out[:, prompt.shape[1]:]
        say("round %d tokens %d sum %d first %s" % (r, new.numel(), int(new.sum()), new[0, :8].tolist()))

report_totals()
