"""The mark-every-hook mode (GPUMEM_TUI_MARKS=hooks): a sync point at every module forward (before
and after), every module backward (before: the gradient of the module's output arrived; after: the
gradient of its input was made) and every optimizer step (before and after). A sync point is the
hook's SYNC record of each device followed by its SYNC_PEAKS record (gpumem_hook_sync_point,
cuda/gpumem_ring.h): torch's allocated, reserved, requested, peak allocated, peak reserved and
active bytes from one reading of the allocator's statistics, tied to that point of the stream.
It exists to hold the monitor's block model to torch's own figures inside steps (test/gpu,
bench/gpu-session.sh part `exact`); it costs one getDeviceStats per device per hook, so it is off
unless asked for.

Backward points come from tensor hooks (Tensor.register_hook on a module's output and inputs, from
its forward hooks), not from module full backward hooks: those wrap every module's inputs and
outputs in a custom Function, and an in-place op on such an output (torchvision's ReLU(inplace=True)
after a BatchNorm) then raises in the program. A tensor hook changes nothing the program sees.

Inside a region torch.compile traces, every hook returns at once (torch.compiler.is_compiling()):
nothing of ours is traced into a graph or breaks one; compiled regions simply write no points.

Every hook is guarded (guard.py): its first failure turns the mode off ("marks" in the notes) and
never reaches the program.
"""
import ctypes
import warnings

from .phases import COMPILE_GLOBAL_HOOKS_WARNING
from .wire import FEATURE_SYNC_POINTS, POINT

ENV = "GPUMEM_TUI_MARKS"
FEATURE = "marks"


def wanted(env):
    """Whether the environment asks for a sync point at every hook."""
    return (env.get(ENV) or "").strip().lower() == "hooks"


def _compiling(torch):
    """torch.compiler.is_compiling where this torch has it, else torch._dynamo's, else never."""
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    if fn is None:
        dynamo = getattr(torch, "_dynamo", None)
        fn = getattr(dynamo, "is_compiling", None)
    return fn or (lambda: False)


def _tensors(value, torch, depth=0):
    """The tensors of a module's inputs or outputs: a tensor, or one level of tuple, list or dict
    (transformers' ModelOutput is a dict) around tensors. Nothing deeper: a hook, not a walk."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 0:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        out = []
        for v in value:
            out += _tensors(v, torch, depth + 1)
        return out
    return []


class SyncPoints:
    """The hooks; `write(point)` is the hook library's gpumem_hook_sync_point."""

    def __init__(self, torch, write, guard):
        self.torch = torch
        self.write = write
        self.guard = guard
        self.on = True
        self.count = 0  # points written (the facts of the recording programs)
        self.compiling = _compiling(torch)
        self.handles = []
        guard.stops(FEATURE, self.stop)

    def point(self, kind):
        self.count += 1
        self.write(kind)

    # -- the hooks: flat, guarded, never raising ------------------------------------------------

    def forward_pre(self, mod, args):
        if not self.on or self.compiling():
            return
        try:
            self.point(POINT["forward_pre"])
            for t in _tensors(args, self.torch):
                if t.requires_grad:
                    t.register_hook(self.backward)
        except Exception as e:
            self.guard.fail(FEATURE, e)

    def forward(self, mod, args, out):
        if not self.on or self.compiling():
            return
        try:
            self.point(POINT["forward"])
            for t in _tensors(out, self.torch):
                if t.requires_grad:
                    t.register_hook(self.backward_pre)
        except Exception as e:
            self.guard.fail(FEATURE, e)

    def backward_pre(self, grad):
        """The gradient of a module's output arrived: its backward runs next."""
        if self.on:
            try:
                self.point(POINT["backward_pre"])
            except Exception as e:
                self.guard.fail(FEATURE, e)
        return None  # the gradient unchanged

    def backward(self, grad):
        """The gradient of a module's input was made: its backward ran."""
        if self.on:
            try:
                self.point(POINT["backward"])
            except Exception as e:
                self.guard.fail(FEATURE, e)
        return None

    def optimizer_pre(self, opt, args, kwargs):
        if self.on:
            try:
                self.point(POINT["optimizer_pre"])
            except Exception as e:
                self.guard.fail(FEATURE, e)

    def optimizer(self, opt, args, kwargs):
        if self.on:
            try:
                self.point(POINT["optimizer"])
            except Exception as e:
                self.guard.fail(FEATURE, e)

    # -- installing and turning off --------------------------------------------------------------

    def install(self):
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        self.handles = [
            nn_module.register_module_forward_pre_hook(self.forward_pre),
            nn_module.register_module_forward_hook(self.forward),
        ]
        # torch.compile's warning about global hooks at every compiled call site: ours stay on
        # after the phases' narrow (phases.py), so the mode filters it for as long as it is on.
        warnings.filterwarnings("ignore", message=COMPILE_GLOBAL_HOOKS_WARNING, category=UserWarning)
        self.warning_filter = warnings.filters[0]
        # Left registered at stop (they return at once): torch walks the optimizer hooks' dict
        # while calling them, and removing one there would raise into the step (phases.py).
        self.optimizer_handles = [
            optim.register_optimizer_step_pre_hook(self.optimizer_pre),
            optim.register_optimizer_step_post_hook(self.optimizer),
        ]
        return self

    def stop(self):
        """Off after a failure: no more points, the module hooks removed. Tensor hooks already
        registered stay on their tensors and return at once."""
        self.on = False
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.handles = []
        f, self.warning_filter = getattr(self, "warning_filter", None), None
        try:
            warnings.filters.remove(f)
        except ValueError:  # the program reset the filters itself
            pass


def start(torch, hook, features, env, notes, guard):
    """The mode where `env` asks for it and the hook can write sync points: a SyncPoints installed,
    else None (with a note saying why, where it was asked for)."""
    if not wanted(env):
        return None
    if hook is None or not features & FEATURE_SYNC_POINTS:
        notes[FEATURE] = "off: %s=hooks needs the allocator hook with sync points (this process has %s)" % (
            ENV, "no hook" if hook is None else "an older hook")
        return None
    hook.gpumem_hook_sync_point.argtypes = [ctypes.c_uint32]
    hook.gpumem_hook_sync_point.restype = None
    return SyncPoints(torch, hook.gpumem_hook_sync_point, guard).install()
