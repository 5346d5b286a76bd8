"""What the guard adds to each Python hook call of the agent: the phase hooks as they run in a
training process (Phases.pre/post around a module call, opt_pre/opt_post around a step, the
wrapped backward), against the same hook bodies without the guard (no "on" check, no try).
No torch needed: the hooks are called directly, the mark is the cheapest callable there is.

    python3 bench/guard_cost.py            # one Python
    for v in 3.9 3.11 3.13; do python$v bench/guard_cost.py; done
"""
import os
import platform
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent"))

from gpumem_agent.phases import BACKWARD, FORWARD, OPTIMIZER, OTHER, Phases  # noqa: E402
from gpumem_agent.wire import ACTION  # noqa: E402


class Unguarded(Phases):
    """The hooks as they were before the guard: the same bodies, nothing around them."""

    def pre(self, mod, args):
        d = getattr(self.depth, "n", 0)
        self.depth.n = d + 1
        if d == 0:
            self.models.add(mod)
            if self.phase != BACKWARD:
                self.set(FORWARD)

    def post(self, mod, args, out):
        d = getattr(self.depth, "n", 1) - 1
        self.depth.n = d
        if d == 0 and self.phase == FORWARD:
            self.set(OTHER)

    def opt_pre(self, opt, args, kwargs):
        self.optimizers.add(opt)
        self.set(OPTIMIZER)

    def opt_post(self, opt, args, kwargs):
        self.step += 1
        self.set(OTHER, ACTION["step"])
        while self.after_step:
            self.after_step.pop(0)()


class Module:
    pass


def mark(action, phase, step):
    pass


def per_call_ns(stmt, n, repeat=7):
    return min(timeit.repeat(stmt, number=n, repeat=repeat)) / n * 1e9


def backward_pair(cls):
    """(wrapped backward, what it wraps) as install() sets them up."""
    import types

    ns = types.SimpleNamespace(backward=lambda: None, grad=lambda: None)
    p = cls(mark)
    if cls is Phases:
        p.wrap_autograd(ns)
        return ns.backward

    def wrapped(*a, __original=ns.backward, **k):  # the wrapper before the guard
        before = p.phase
        p.set(BACKWARD)
        try:
            return __original(*a, **k)
        finally:
            p.set(before if before != BACKWARD else OTHER)

    return wrapped


def main():
    n = 200_000
    m, inner, opt = Module(), Module(), Module()
    rows = []
    for label, make in (
        ("module call, outermost (pre+post, 2 marks)", lambda p: lambda: (p.pre(m, ()), p.post(m, (), None))),
        ("module call, nested (pre+post, no mark)", lambda p: (p.pre(m, ()), lambda: (p.pre(inner, ()), p.post(inner, (), None)))[1]),
        ("optimizer step (opt_pre+opt_post, 2 marks)", lambda p: lambda: (p.opt_pre(opt, (), {}), p.opt_post(opt, (), {}))),
    ):
        t = {}
        for cls in (Unguarded, Phases):
            p = cls(mark)
            f = make(p)
            t[cls] = per_call_ns(f, n)
        rows.append((label, t[Unguarded], t[Phases], 2))
    t = {cls: per_call_ns(backward_pair(cls), n) for cls in (Unguarded, Phases)}
    rows.append(("backward() through the wrapper (2 marks)", t[Unguarded], t[Phases], 1))
    print("Python %s (%s), %d calls, best of 7" % (platform.python_version(), platform.machine(), n))
    print("%-46s %12s %12s %16s" % ("per event", "unguarded ns", "guarded ns", "added per hook ns"))
    for label, a, b, hooks in rows:
        print("%-46s %12.1f %12.1f %16.1f" % (label, a, b, (b - a) / hooks))


if __name__ == "__main__":
    main()
