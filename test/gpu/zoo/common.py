"""What the zoo's programs share: seeds and deterministic kernels, a small GPT-2 shape, and the last
line test/gpu/zoo.ts reads (torch's own allocated and reserved bytes per device, once the work is done).

Each program is a script a user could have written; these few lines are what a careful user writes
once and imports: the harness compares a run with the agent to one without, so every program prints
only what is the same from run to run on the same GPU (losses to 4 places, token ids, counts).
"""
import gc
import json
import os
import random


def deterministic(seed=0):
    """Seeds, and kernels that give the same bits every run (warn, not fail, where an op has none)."""
    # cuBLAS reads this when it makes its first handle: before any CUDA work.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    return torch


def gpt2_config(**overrides):
    """A GPT-2 shaped config (no download): small enough for a few hundred steps in seconds."""
    from transformers import GPT2Config

    vocab = overrides.pop("vocab_size", 8192)
    kw = dict(vocab_size=vocab, n_positions=256, n_embd=256, n_layer=4, n_head=4,
              bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    kw.update(overrides)
    return GPT2Config(**kw)


def say(*parts):
    print(*parts, flush=True)


def report_totals():
    """The last line: TORCH_TOTALS {"pid", "rank", "devices": {index: {"allocated", "reserved"}}},
    torch's memory_allocated() and memory_reserved() of every device this process holds memory on,
    after the garbage is collected and the devices are idle. Printed last, with everything still
    alive: what the agent reads at exit is the same state."""
    import torch

    gc.collect()
    devices = {}
    for d in range(torch.cuda.device_count()):
        if torch.cuda.memory_reserved(d) == 0:
            continue  # untouched: no context to make here
        torch.cuda.synchronize(d)
        devices[str(d)] = {"allocated": torch.cuda.memory_allocated(d), "reserved": torch.cuda.memory_reserved(d)}
    rank = os.environ.get("RANK")
    line = {"pid": os.getpid(), "rank": int(rank) if rank is not None else None, "devices": devices}
    print("TORCH_TOTALS " + json.dumps(line, sort_keys=True), flush=True)
