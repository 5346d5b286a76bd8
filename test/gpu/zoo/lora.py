"""PEFT LoRA on GPT-2 (from a transformers config): adapters on the attention and projection
layers, AdamW over the adapters only.

    python test/gpu/zoo/lora.py --steps 1000
"""
import argparse

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1000)
args = ap.parse_args()

torch = deterministic(0)
from peft import LoraConfig, get_peft_model
from transformers import GPT2LMHeadModel

config = gpt2_config()
base = GPT2LMHeadModel(config)
lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["c_attn", "c_proj"], fan_in_fan_out=True, task_type="CAUSAL_LM")
model = get_peft_model(base, lora).cuda()
trainable = [p for p in model.parameters() if p.requires_grad]
say("lora trainable %d of %d" % (sum(p.numel() for p in trainable), sum(p.numel() for p in model.parameters())))
opt = torch.optim.AdamW(trainable, lr=1e-3)

gen = torch.Generator(device="cuda").manual_seed(1000)
for step in range(1, args.steps + 1):
    ids = torch.randint(0, config.vocab_size, (8, 128), device="cuda", generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 100 == 0 or step == args.steps:
        say("step %d loss %.4f" % (step, loss.item()))

report_totals()
