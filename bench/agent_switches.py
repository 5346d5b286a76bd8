"""The agent's parts, each switchable off and on in a running training (for the benchmarks that
measure what each part costs: agent_parts.py, and agent_overhead_gpt2.py's bare modes). Its own
module so that both import it and neither imports the other."""

import ctypes
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The reader part runs agent_parts.py --reader in a process of its own.
PARTS_SCRIPT = os.path.join(HERE, "agent_parts.py")
HOOK_TRACKER, HOOK_RANGES = 0, 1


class Unavailable(Exception):
    """A part this agent cannot switch: said in the results, never a crash."""


class Switch:
    """One part: set(True) as shipped, set(False) without it. `why`: why it cannot be switched."""

    def __init__(self, on=None, off=None, why=None, shipped=True):
        self._on, self._off, self.why, self.shipped = on, off, why, shipped
        self.state = shipped

    def set(self, on):
        if self.why or on == self.state:
            return
        (self._on if on else self._off)()
        self.state = on


def _hook_switch(agent, part):
    fn = getattr(agent.hook, "gpumem_hook_bench_set", None) if agent.hook else None
    if fn is None:
        raise Unavailable("no hook" if not agent.hook else "this hook has no gpumem_hook_bench_set (built from an older source)")
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int

    def call(on):
        rc = fn(part, int(on))
        if rc != 0:
            raise OSError(-rc, "gpumem_hook_bench_set(%d, %d): %s" % (part, on, os.strerror(-rc)))

    call(True)  # checks it answers; on is the shipped state
    return Switch(lambda: call(True), lambda: call(False))


class _HookEntries:
    """Hooks that torch keeps in dicts (a RemovableHandle names its dict and key), taken out of
    their dicts and put back in, the handles and the agent's state untouched."""

    def __init__(self, handles):
        self.where = []
        for h in handles:
            ref, key = getattr(h, "hooks_dict_ref", None), getattr(h, "id", None)
            d = ref() if callable(ref) else None
            if d is None or key not in d:
                raise Unavailable("a hook handle whose dict is gone (torch's RemovableHandle changed?)")
            self.where.append((d, key, d[key]))
        if not self.where:
            raise Unavailable("no such hooks registered")

    def on(self):
        for d, key, fn in self.where:
            d[key] = fn

    def off(self):
        for d, key, _ in self.where:
            d.pop(key, None)


def _phases(agent):
    ph = getattr(agent, "phases", None)
    if ph is None:
        raise Unavailable("the agent has no phases")
    if not getattr(ph, "on", True):
        raise Unavailable("phases are off in this process: %s" % getattr(agent, "notes", {}).get("phases", "?"))
    return ph


def _module_hooks(agent, torch):
    ph = _phases(agent)
    if getattr(ph, "global_hooks", None):
        raise Unavailable("still in the global state (no optimizer step yet)")
    entries = _HookEntries(list(getattr(ph, "handles", [])))
    return Switch(entries.on, entries.off)


def _global_module_hooks(agent, torch):
    from torch.nn.modules import module as nn_module

    ph = _phases(agent)
    pre, post = getattr(ph, "pre", None), getattr(ph, "post", None)
    if pre is None or post is None:
        raise Unavailable("phases has no pre/post hook methods")
    handles = []

    def on():
        handles[:] = [nn_module.register_module_forward_pre_hook(pre), nn_module.register_module_forward_hook(post)]

    def off():
        for h in handles:
            h.remove()
        handles.clear()

    return Switch(on, off, shipped=False)


def _autograd(agent, torch):
    ph = _phases(agent)
    patched = []
    for entry in getattr(ph, "patched", []):
        obj, name, original = entry[:3]
        wrapper = entry[3] if len(entry) > 3 else getattr(obj, name)
        if getattr(obj, name) is not wrapper:
            raise Unavailable("torch.autograd.%s is no longer the agent's wrapper" % name)
        patched.append((obj, name, original, wrapper))
    if not patched:
        raise Unavailable("nothing wrapped")

    def put(i):
        for p in patched:
            setattr(p[0], p[1], p[i])

    return Switch(lambda: put(3), lambda: put(2))


def _optimizer_hooks(agent, torch):
    ph = _phases(agent)
    handles = getattr(ph, "opt_handles", None)
    if handles is None:  # an agent before the optimizer hooks had handles of their own
        from torch.optim import optimizer as optim

        dicts = (optim._global_optimizer_pre_hooks, optim._global_optimizer_post_hooks)
        handles = [h for h in getattr(ph, "handles", []) if getattr(h, "hooks_dict_ref", lambda: None)() in dicts]
    entries = _HookEntries(handles)
    return Switch(entries.on, entries.off)


def _sync_thread(agent, torch):
    if not callable(getattr(agent, "sync", None)) or not hasattr(agent, "_sync_loop"):
        raise Unavailable("the agent has no sync loop")

    def off():
        agent.sync = lambda: None  # the loop calls self.sync(): this instance's, while it exists

    def on():
        agent.__dict__.pop("sync", None)

    return Switch(on, off)


def _control_thread(agent, torch):
    from gpumem_agent.control import ControlServer

    if not getattr(agent, "server", None) or not getattr(agent, "sock_path", None):
        raise Unavailable("no control server")

    def on():
        guard = getattr(agent, "guard", None)
        try:
            agent.server = ControlServer(agent.sock_path, agent.handlers(), on_error=lambda e: guard.fail("control", e)).start()
        except TypeError:  # a server without on_error
            agent.server = ControlServer(agent.sock_path, agent.handlers()).start()

    def off():
        agent.server.stop()  # its thread ends at its next wake-up (≤ 0.5 s)

    return Switch(on, off)


def _reader(agent, torch):
    path = getattr(agent, "ring_path", None)
    if not path or not os.path.exists(path):
        raise Unavailable("no ring file")
    proc = subprocess.Popen([sys.executable, PARTS_SCRIPT, "--reader", path], stdin=subprocess.DEVNULL)
    time.sleep(0.3)
    if proc.poll() is not None:
        raise Unavailable("the reader exited at once (status %s)" % proc.returncode)
    sw = Switch(lambda: proc.send_signal(signal.SIGCONT), lambda: proc.send_signal(signal.SIGSTOP))
    sw.proc = proc
    return sw


def _stacks(agent, torch):
    """The hook's Python stacks (stacks.py: on by default, sampled by bytes): off through the hook's
    own switch (gpumem_hook_stacks(0, 0)), on again at the agent's settings."""
    from gpumem_agent import stacks

    st = getattr(agent, "stacks", None)
    if st is None or not agent.hook:
        raise Unavailable("stacks are off in this process: %s" % getattr(agent, "notes", {}).get("stacks", "not started"))

    def call(min_bytes, sample_bytes):
        rc = stacks.set_stacks(agent.hook, min_bytes, sample_bytes)
        if rc != 0:
            raise OSError(-rc, "gpumem_hook_stacks(%d, %d): %s" % (min_bytes, sample_bytes, os.strerror(-rc)))

    return Switch(lambda: call(st.min_bytes, st.sample_bytes), lambda: call(0, 0))


FACTORIES = {
    "tracker": lambda a, t: _hook_switch(a, HOOK_TRACKER),
    "ranges": lambda a, t: _hook_switch(a, HOOK_RANGES),
    "module-hooks": _module_hooks, "global-module-hooks": _global_module_hooks, "autograd": _autograd,
    "optimizer-hooks": _optimizer_hooks, "sync-thread": _sync_thread, "control-thread": _control_thread, "reader": _reader,
    "stacks": _stacks,
}


def switches(agent, torch, reader=True):
    """{part: Switch} for this attached agent (after its first optimizer step); a part that cannot
    be switched has `why` set. Also used by agent_overhead_gpt2.py's bare modes."""
    out = {"null": Switch(lambda: None, lambda: None)}
    for name, make in FACTORIES.items():
        if name == "reader" and not reader:
            continue
        try:
            out[name] = make(agent, torch)
        except Unavailable as e:
            out[name] = Switch(why=str(e))
        except Exception as e:  # noqa: BLE001 - a part that fails to set up is reported, the rest still run
            out[name] = Switch(why="%s: %s" % (type(e).__name__, e))
    members = [s for n, s in out.items() if n not in ("null", "global-module-hooks") and not s.why]

    def each(on):
        for s in members:
            s.set(on)

    out["all"] = Switch(lambda: each(True), lambda: each(False))
    return out


def close(sw):
    for s in sw.values():
        proc = getattr(s, "proc", None)
        if proc is not None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
