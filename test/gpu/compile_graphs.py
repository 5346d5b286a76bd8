"""torch.compile(mode="reduce-overhead") (CUDA graphs) on the small GPT-2 of the snapshot fixtures
(2 layers, d=128, vocab 1,000; batch 4x64), AdamW outside the compiled region: the program behind
the compile-graphs ring fixture (bench/gpu-session.sh, part `fixtures`):

    GPUMEM_TUI_DIR=DIR GPUMEM_TUI_KEEP=1 GPUMEM_TUI_RING_CAPACITY=524288 \\
      bun src/cli.ts run --json --output OUT/compile-graphs.run.ndjson -- \\
      python3 test/gpu/compile_graphs.py --out OUT [--steps 8]

Under `gpumem-tui run` the agent is injected and attaches as torch is imported, so its ring holds
the run from the start: the model, the compiling (inductor's benchmark runs), the CUDA graphs'
warm-up, capture and replays. Once the steps are done the program saves a compact copy of that ring,
OUT/compile-graphs.ring, with its manifest OUT/compile-graphs.json (gpumem_agent.save_ring): the
monitor that started the program removes the live ring once the program exits, GPUMEM_TUI_KEEP or
not. OUT/compile-graphs.facts.json holds torch's figures at the same moment, in the fields of the
other rings' facts (test/agent/scenarios.py), plus torch.cuda.memory_stats() whole, `pools` (per
segment_pool_id of torch.cuda.memory._snapshot(): reserved and allocated bytes), compiled /
compile_error, the losses and the ring's own counts.

The ring's segment records carry their pool (the manifest's `segment_pools`): the replay's private
pool is checked against `pools` in the facts (test/snapshot/recorded-from-start.test.tsx).

Exit status: 0; 2 where torch, transformers or a CUDA device is missing; 3 where torch.compile or a
compiled step failed (the facts say so); 4 where no private pool appeared (CUDA graphs not used).
Run plainly (no agent) it still trains and writes its facts, with `records` null.
"""
import argparse
import importlib.util
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# The snapshot fixtures' helpers: the same GPT-2 and the same pool figures as their compile-graphs.
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "snapshots"))
from capture_more import compiler_counters, first_lines, pools  # noqa: E402
from capture_common import GPT2_CONFIG  # noqa: E402

NAME = "compile-graphs"


def fail(message, code):
    sys.stderr.write("compile_graphs: %s\n" % message)
    sys.exit(code)


def ring_facts(a):
    """What the agent `a` says of its ring, in the fields of the rings' facts: its steps, how much it
    wrote and holds, whether a lane lapped (records lost), the agent's mode and hook error."""
    r = a.ring
    return {
        "steps": r.get("<I", "cur_step"),
        "ring_written": r.written(),
        "ring_capacity": r.capacity,
        "ring_lapped": any(r.lane_written(lane) > r.capacity for lane in range(r.n_lanes)),
        "agent_mode": a.mode,
        "hook_error": a.hook_error,
    }


def torch_figures(torch, dev):
    """torch's own figures, in the fields of the other rings' facts (test/agent/scenarios.py)."""
    s = torch.cuda.memory_stats(dev)
    return {
        "memory_allocated": torch.cuda.memory_allocated(dev),
        "memory_reserved": torch.cuda.memory_reserved(dev),
        "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
        "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
        "active": s.get("active_bytes.all.current", 0),
        "num_alloc_retries": s.get("num_alloc_retries", 0),
        "num_ooms": s.get("num_ooms", 0),
        "requested_bytes": s.get("requested_bytes.all.current", 0),
        "allocation_count": s.get("allocation.all.allocated", 0),
        "free_count": s.get("allocation.all.freed", 0),
        "segment_alloc_count": s.get("segment.all.allocated", 0),
        "segment_free_count": s.get("segment.all.freed", 0),
        "torch_version": torch.__version__,
        "expandable_segments": "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }


def train(torch, steps):
    """The compiled training: (losses, error or None). Compiling happens at the first call."""
    from torch.profiler import record_function
    from transformers import GPT2Config, GPT2LMHeadModel

    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    cfg = GPT2Config(**GPT2_CONFIG)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, mode="reduce-overhead")
    losses = []
    try:
        for _ in range(steps):
            torch.compiler.cudagraph_mark_step_begin()  # a new iteration: the last one's outputs may go
            with record_function("data"):
                x = torch.randint(0, cfg.vocab_size, (4, 64), device=dev)
            with record_function("train_step"):
                out = compiled(input_ids=x, labels=x)
                out.loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            losses.append(round(out.loss.item(), 4))
    except Exception as e:
        traceback.print_exc()
        return losses, "%s at step %d: %s" % (type(e).__name__, len(losses) + 1, first_lines(e)), (model, opt)
    return losses, None, (model, opt)


def main():
    ap = argparse.ArgumentParser(description="torch.compile reduce-overhead on a small GPT-2, for a ring fixture")
    ap.add_argument("--out", required=True, help="where compile-graphs.{ring,json,facts.json} go")
    ap.add_argument("--steps", type=int, default=8, help="training steps (at least 3: warm-up, capture, replay)")
    args = ap.parse_args()
    if args.steps < 3:
        fail("--steps must be at least 3 (CUDA graphs warm up, then capture, then replay)", 2)
    for module in ("torch", "transformers"):
        if importlib.util.find_spec(module) is None:
            fail("the Python package %s is not installed for %s" % (module, sys.executable), 2)
    import torch

    if not torch.cuda.is_available():
        fail("torch %s sees no CUDA device" % torch.__version__, 2)
    os.makedirs(args.out, exist_ok=True)
    losses, error, alive = train(torch, args.steps)  # the model and optimizer stay alive to the end
    dev = torch.device("cuda", 0)
    try:
        torch.cuda.synchronize()
        facts = torch_figures(torch, dev)
        facts["memory_stats"] = dict(torch.cuda.memory_stats(dev))
        facts["pools"] = pools(torch.cuda.memory._snapshot())
    except Exception as e:  # a failed capture can leave CUDA unusable: the first error is still said
        if error is None:
            raise
        fail("torch.compile(mode=\"reduce-overhead\") or a compiled step failed: %s (then: %s)" % (error, first_lines(e)), 3)
    facts.update({"scenario": NAME, "steps_done": len(losses), "compiled": error is None, "compile_error": error,
                  "losses": losses, "cudagraphs_used": any(p["pool_id"] != [0, 0] for p in facts["pools"])})
    facts.update(compiler_counters())
    # The agent, where `gpumem-tui run` injected it: the same module its sitecustomize imported.
    agent_mod = sys.modules.get("gpumem_agent")
    a = agent_mod.current() if agent_mod else None
    if a is not None and a.ring is not None:
        path = os.path.join(args.out, NAME + ".ring")
        facts["records"] = agent_mod.save_ring(path)  # after the agent's sync: its totals are torch's now
        facts.update(ring_facts(a))
    else:
        facts.update({"records": None, "steps": None, "agent": "not attached (not run under gpumem-tui run)"})
    with open(os.path.join(args.out, NAME + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print("compile_graphs: %d steps, losses %s, allocated %d, reserved %d, pools %s, records %s"
          % (len(losses), losses, facts["memory_allocated"], facts["memory_reserved"],
             [(p["pool_id"], p["reserved_bytes"], p["allocated_bytes"]) for p in facts["pools"]], facts["records"]),
          flush=True)
    if error is not None:
        fail("torch.compile(mode=\"reduce-overhead\") or a compiled step failed: %s" % error, 3)
    if not facts["cudagraphs_used"]:
        fail("no private pool in torch.cuda.memory._snapshot(): CUDA graphs were not used (inductor_counters in the facts say why)", 4)


if __name__ == "__main__":
    main()
