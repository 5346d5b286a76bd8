"""What consistency costs the hook: the sync records (torch's figures at each step boundary).

    PYTHONPATH=agent python3 bench/sync_cost.py [OUT.json]

The per-event path (the allocator trace callback) is unchanged by sync records: a sync is written
at attach, at every step mark and at detach. So the cost is per step: a step mark with its syncs
against a phase mark without, each timed over many calls in one process, interleaved, minimum of
the rounds (ctypes' own cost is in both and cancels). Divided by the allocator events of a step of
a real training (transformers GPT-2 from a config, counted here) it is the cost per event.
"""
import json
import sys
import time

import torch

import gpumem_agent

PHASE, STEP = 16, 17
ROUNDS, CALLS = 15, 2000


def timed(hook, action, step):
    t0 = time.perf_counter_ns()
    for _ in range(CALLS):
        hook.gpumem_hook_mark(action, 0, step)
    return (time.perf_counter_ns() - t0) / CALLS


def events_per_step():
    """Allocator events of one GPT-2 training step (batch 8 × 256), from the hook's own counters."""
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=256)).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (8, 256), device="cuda")
    ring = gpumem_agent.current().ring
    counts = []
    for _ in range(6):
        t = ring.totals(0)
        before = t["n_alloc"] + t["n_free"]
        m(x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t = ring.totals(0)
        counts.append(t["n_alloc"] + t["n_free"] - before)
    return min(counts[2:])


def main():
    torch.zeros(1, device="cuda")
    a = gpumem_agent.attach()
    assert a is not None and a.mode == "hook", "the hook did not attach"
    keep = [torch.empty(1 << 20, device="cuda") for _ in range(64)]  # a device with live memory
    hook = a.hook
    phase, step = [], []
    for r in range(ROUNDS):
        phase.append(timed(hook, PHASE, 0))
        step.append(timed(hook, STEP, r))
    per_step_ns = min(step) - min(phase)
    n = events_per_step()
    out = {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "phase_mark_ns": round(min(phase), 1),
        "step_mark_with_sync_ns": round(min(step), 1),
        "sync_per_step_ns": round(per_step_ns, 1),
        "gpt2_events_per_step": n,
        "sync_per_event_ns": round(per_step_ns / n, 4),
        "per_event_path_changed": False,
        "rounds": ROUNDS,
        "calls_per_round": CALLS,
    }
    del keep
    print(json.dumps(out))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
