"""gpumem_agent: the in-process side of gpumem-tui (docs/protocol.md).

    import gpumem_agent; gpumem_agent.attach()

or, with no change to the program: `gpumem-tui run -- python train.py`. Idempotent, safe before or
after CUDA is initialized; GPUMEM_TUI_DISABLE=1 turns it off.
"""
import os

__all__ = ["attach", "current", "save_ring"]

_agent = None


def attach(directory=None):
    """Attach to this process: now if CUDA is initialized, else when it initializes."""
    global _agent
    if _agent is not None:
        return _agent
    if os.environ.get("GPUMEM_TUI_DISABLE") == "1":
        return None
    import torch

    from .agent import Agent

    _agent = Agent(torch, directory)
    if torch.cuda.is_initialized():
        _agent.start()
    else:
        # Runs inside CUDA's lazy initialization; Agent.start never raises.
        torch.cuda._lazy_call(_agent.start)
    return _agent


def current():
    """The attached Agent, or None."""
    return _agent


def save_ring(path):
    """A compact copy of this process's ring (and its manifest as path.json) for replay."""
    import json

    from . import ring

    a = _agent
    if a is None or a.ring is None:
        raise RuntimeError("gpumem_agent is not attached to CUDA in this process")
    a.sync()
    n = ring.save_compact(a.ring_path, path)
    base = path[:-5] if path.endswith(".ring") else path
    with open(base + ".json", "w") as f:
        m = a.manifest()
        m["ring"] = os.path.basename(path)
        json.dump(m, f, indent=1)
    return n
