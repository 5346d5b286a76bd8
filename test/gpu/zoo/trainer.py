"""The transformers Trainer on GPT-2 (from a config): bf16, gradient accumulation over 4 batches,
2 DataLoader workers, no reporting integrations, a small in-memory dataset, output in a temp dir.

    python test/gpu/zoo/trainer.py --steps 100
"""
import argparse
import tempfile

from common import deterministic, gpt2_config, report_totals, say

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100)
args = ap.parse_args()

torch = deterministic(0)
from transformers import GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_callback import PrinterCallback


class RandomTokens(torch.utils.data.Dataset):
    """Token sequences made once, in memory (a stand-in for a tokenized corpus)."""

    def __init__(self, n, seq, vocab):
        g = torch.Generator().manual_seed(1234)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


config = gpt2_config()
model = GPT2LMHeadModel(config)
out_dir = tempfile.mkdtemp(prefix="zoo-trainer-")
targs = TrainingArguments(
    output_dir=out_dir,
    max_steps=args.steps,
    per_device_train_batch_size=8,
    gradient_accumulation_steps=4,
    learning_rate=3e-4,
    bf16=True,
    dataloader_num_workers=2,
    report_to="none",
    logging_steps=10,
    save_strategy="no",
    seed=0,
    disable_tqdm=True,
)
trainer = Trainer(model=model, args=targs, train_dataset=RandomTokens(2048, 128, config.vocab_size))
trainer.remove_callback(PrinterCallback)  # its log lines carry timings; the losses are printed below
result = trainer.train()

say("trainer global_step %d training_loss %.4f" % (result.global_step, result.training_loss))
for entry in trainer.state.log_history:
    if "loss" in entry:
        say("step %d loss %.4f" % (entry["step"], entry["loss"]))
report_totals()
