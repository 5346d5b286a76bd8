"""What a step is fed, and the allocator's own limit: the monitor's batch forecast (src/profiler/
forecast.ts) scales a step's activations with the input's shape, and caps its answer at the limit.

INPUT: at the first outermost forward of each step (phases.py calls `at_forward` from its pre-hook),
the first tensor argument of that call, positional first, else the first keyword one (transformers'
model(input_ids=x)): its first dimension (the batch), its second (the sequence; 0 for one
dimension), its elements. One record a step; nothing is walked, copied or synchronized (shape and
numel are host metadata).

LIMIT: torch.cuda.set_per_process_memory_fraction caps what the caching allocator may reserve at
fraction x the device's total; torch has no getter in every version, so the setter is wrapped (the
program's call passes through untouched, its result and exceptions too) and, where a getter exists
(attach, after the program set it), it is read once per device at that device's first INPUT.

Every path is guarded (guard.py): a failure turns this off ("inputs" in the notes) and never
reaches the program.
"""
import functools

from .guard import unpatch
from .wire import ACTION

FEATURE = "inputs"


def first_tensor(torch, args, kwargs):
    """The call's first tensor argument: positional first, then keyword, top level only."""
    for v in args or ():
        if isinstance(v, torch.Tensor):
            return v
    for v in (kwargs or {}).values():
        if isinstance(v, torch.Tensor):
            return v
    return None


def shape_of(t):
    """(batch, sequence, elements) of a tensor: its first two dimensions, 0 where it has fewer."""
    shape = tuple(t.shape)
    n = 1
    for s in shape:
        n *= int(s)
    return (int(shape[0]) if len(shape) >= 1 else 0), (int(shape[1]) if len(shape) >= 2 else 0), n


class Inputs:
    """`write(action, device, address, size, extra)` is the hook's gpumem_hook_value."""

    def __init__(self, torch, write, guard, compiling=None):
        self.torch = torch
        self.write = write
        self.guard = guard
        self.on = True
        self.compiling = compiling or (lambda: False)
        self.last_step = -1
        self.limits = {}  # device -> the limit last written (bytes; 0 none)
        self.patched = []  # (object, name, original, wrapper)
        guard.stops(FEATURE, self.stop)

    # -- from phases.py's outermost pre-hook, on the training thread ------------------------------

    def at_forward(self, step, args, kwargs):
        if not self.on or step == self.last_step:
            return
        try:
            self.last_step = step  # once a step, found or not: a step fed no tensor costs nothing more
            if self.compiling():
                return  # shapes inside a traced region are symbolic: never specialized by us
            t = first_tensor(self.torch, args, kwargs)
            if t is None or not t.is_cuda:
                return
            dev = t.device.index if t.device.index is not None else self.torch.cuda.current_device()
            batch, seq, n = shape_of(t)
            self.write(ACTION["input"], dev, seq, batch, n)
            if dev not in self.limits:
                self._read_limit(dev)
        except Exception as e:
            self.guard.fail(FEATURE, e)

    # -- the limit -----------------------------------------------------------------------------

    def _limit_bytes(self, fraction, dev):
        total = self.torch.cuda.get_device_properties(dev).total_memory
        return int(fraction * total) if 0 <= fraction < 1 else 0  # 1.0: the whole device, no cap of its own

    def _read_limit(self, dev):
        getter = getattr(self.torch.cuda, "get_per_process_memory_fraction", None)
        self.limits[dev] = 0
        if getter is None:
            return
        try:
            fraction = float(getter(dev))
        except Exception:  # a torch whose getter refuses this device: no limit said, shapes go on
            return
        self._put_limit(dev, self._limit_bytes(fraction, dev))

    def _put_limit(self, dev, limit):
        if self.limits.get(dev) != limit:
            self.limits[dev] = limit
            self.write(ACTION["limit"], dev, 0, limit, 0)

    def set_fraction(self, fraction, device=None):
        """After the program's torch.cuda.set_per_process_memory_fraction(fraction, device) returned."""
        if not self.on:
            return
        try:
            torch = self.torch
            if device is None:
                dev = torch.cuda.current_device()
            elif isinstance(device, int):
                dev = device
            else:
                dev = torch.device(device).index
                dev = torch.cuda.current_device() if dev is None else dev
            self._put_limit(dev, self._limit_bytes(float(fraction), dev))
        except Exception as e:
            self.guard.fail(FEATURE, e)

    def install(self):
        """The setter wrapped where the program calls it (torch.cuda and torch.cuda.memory)."""
        torch = self.torch
        original = getattr(torch.cuda, "set_per_process_memory_fraction", None)
        if original is None:
            return self
        after = self.set_fraction

        @functools.wraps(original)
        def wrapped(fraction, device=None, *a, **k):
            result = original(fraction, device, *a, **k)
            after(fraction, device)
            return result

        for owner in (torch.cuda, getattr(torch.cuda, "memory", None)):
            if getattr(owner, "set_per_process_memory_fraction", None) is original:
                setattr(owner, "set_per_process_memory_fraction", wrapped)
                self.patched.append((owner, "set_per_process_memory_fraction", original, wrapped))
        return self

    def stop(self):
        """Off after a failure: no more records, the setter given back where it is still ours."""
        self.on = False
        unpatch(self.patched)
        self.patched = []


def start(torch, hook, features, notes, guard, compiling=None):
    """Inputs where the hook can write them, else None (a note says why)."""
    from .wire import FEATURE_VALUES

    if hook is None:
        return None
    if not features & FEATURE_VALUES:
        notes[FEATURE] = "off: this process's hook is older (no gpumem_hook_value)"
        return None
    import ctypes

    fn = hook.gpumem_hook_value
    fn.argtypes = [ctypes.c_uint8, ctypes.c_int8, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    fn.restype = None
    return Inputs(torch, fn, guard, compiling).install()
