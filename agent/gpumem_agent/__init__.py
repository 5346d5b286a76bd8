"""gpumem_agent: the in-process side of gpumem-tui (docs/protocol.md).

    import gpumem_agent; gpumem_agent.attach()

or, with no change to the program: `gpumem-tui run -- python train.py`. Idempotent, safe before or
after CUDA is initialized; GPUMEM_TUI_DISABLE=1 turns it off.

What it reads of its environment, where it imports from, and the processes it refuses to start in
(setuid, setgid): trust.py.
"""
import os

from . import trust

__all__ = ["attach", "attach_running", "current", "save_ring", "profile", "profile_every", "profile_stats", "print_profile", "report", "courtesy"]

_agent = None
_profiler = None


def attach(directory=None):
    """Attach to this process: now if CUDA is initialized, else when it initializes."""
    global _agent
    if _agent is not None:
        return _agent
    env = trust.environ()
    if env.get("GPUMEM_TUI_DISABLE") == "1":
        return None
    if _refused():
        return None
    import torch

    try:
        with trust.only_trusted(trust.agent_root()):
            from .agent import Agent
        _agent = Agent(torch, directory)
        if torch.cuda.is_initialized():
            _agent.start()
        else:
            # Runs inside CUDA's lazy initialization; Agent.start never raises.
            torch.cuda._lazy_call(_agent.start)
    except Exception as e:  # the program runs on without us: never an exception from attach()
        if env.get("GPUMEM_TUI_VERBOSE") == "1":
            import sys

            sys.stderr.write("gpumem-agent: not attached: %s: %s\n" % (type(e).__name__, e))
        _agent = None
    return _agent


_said_refusal = False


def _refused():
    """Whether this process is one the agent does not start in (trust.refusal), said once on stderr."""
    global _said_refusal
    why = trust.refusal()
    if why and not _said_refusal:
        _said_refusal = True
        import sys

        sys.stderr.write("gpumem-agent: not attached: %s\n" % why)
    return why is not None


def attach_running(token, monitor_pid=None, monitor_start=None):
    """Attach to this program while it runs (`gpumem-tui attach PID`): called by the bootstrap the
    monitor's injector runs, on a thread of its own, with the monitor's token file. The answer
    goes to `<token>.error` where refused; the agent's manifest appears where it started
    (docs/protocol.md, "Attaching to a running process"). `monitor_pid`: the monitor that owns
    the attach; the agent detaches when it exits. Never raises."""
    try:
        with trust.only_trusted(trust.agent_root()):
            from .attaching import attach_running as _attach_running
    except Exception:  # a broken install: the program runs on without us
        return None
    return _attach_running(token, monitor_pid, monitor_start)


def current():
    """The attached Agent, or None."""
    return _agent


def save_ring(path):
    """A compact copy of this process's ring (and its manifest as path.json) for replay, both
    0600 and never through a link (ring.save_recording: OSError says why a name is refused)."""
    from . import ring

    a = _agent
    if a is None or a.ring is None:
        raise RuntimeError("gpumem_agent is not attached to CUDA in this process")
    a.sync()
    return ring.save_recording(a.ring_path, path, a.manifest())


def _lines():
    global _profiler
    if _profiler is None:
        from .lines import Profiler

        attach()
        _profiler = Profiler(current)
    return _profiler


def profile(fn=None, *, every=1):
    """Decorator: per line of `fn`, bytes allocated and freed, peak active and reserved bytes while
    the line ran, and hits, from the allocator's events. Printed at exit (stderr; GPUMEM_PROFILE_QUIET=1
    turns it off, GPUMEM_PROFILE_JSON=FILE also writes JSON), shown live on the monitor's Lines
    screen, and returned by profile_stats(). Works on functions, methods and bound methods
    (`model.forward = gpumem_agent.profile(model.forward)`)."""
    if fn is None:
        return lambda f: _lines().wrap(f, every)
    return _lines().wrap(fn, every)


def profile_every(n):
    """Decorator: like profile, for every n-th call only (the others run untraced)."""
    return lambda f: _lines().wrap(f, n)


def profile_stats():
    """What the line profiler has gathered: a list of functions, each with its lines."""
    return _profiler.stats() if _profiler else []


def print_profile(file=None):
    """Print the line profiler's table now (pytorch_memlab's layout)."""
    import sys

    if _profiler:
        (file or sys.stdout).write(_profiler.format())


def line_names():
    """Line id → "file.py:42: code", for the manifest (the monitor's Lines screen)."""
    return dict(_profiler.line_names) if _profiler else {}


def report(model=None, device=None, file=None):
    """pytorch_memlab's MemReporter, from the allocator's side: every live CUDA tensor (named from
    `model` and the optimizers the agent saw), storages shared between views counted once, totals
    per device, and what memory_allocated() holds beyond them. Prints a table; returns the rows."""
    from .report import report as _report

    return _report(attach(), model=model, device=device, file=file)


def courtesy(device=None):
    """`with gpumem_agent.courtesy():` moves this process's CUDA tensors to host memory and releases
    the cache for the block's duration, so another process can use the GPU; restores them after."""
    from .report import Courtesy

    return Courtesy(attach(), device)


def load_ipython_extension(ipython):
    """`%load_ext gpumem_agent`: the %gpumem and %%gpumem magics (line profile a statement or a cell)."""
    from .magics import register

    register(ipython)
