"""Phases and steps without a change to user code: module forward hooks (outermost calls only),
torch.autograd.backward/grad wrapped, global optimizer step hooks. Each transition is one call
into the hook (a mark in the ring); nothing happens per allocator event here.

Global module hooks send every module call in the process down PyTorch's slow path, so they stay
only until the first optimizer step: by then the outermost modules (the models) are known, and
hooks on those alone take over. A model first called after that step has no forward phase.

While the global hooks are on, torch.compile's OptimizedModule warns at every call site that
"global hooks on modules" fire an extra time: ours are not the program's, so that one warning is
filtered for as long as they are on, unless the program had global hooks of its own before ours.

Every hook is guarded (guard.py): its failure turns phases off ("phases" in the notes) and never
reaches the program; the wrapped backward/grad still call torch's and pass on its result and its
exceptions untouched.
"""
import functools
import threading
import warnings
import weakref

from .guard import Guard, unpatch
from .wire import ACTION, PHASE

OTHER, FORWARD, BACKWARD, OPTIMIZER = PHASE["other"], PHASE["forward"], PHASE["backward"], PHASE["optimizer"]
# torch/_dynamo/eval_frame.py, OptimizedModule.__call__ (re.match, case-insensitive, from the start).
COMPILE_GLOBAL_HOOKS_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks on modules"


class Phases:
    def __init__(self, mark, guard=None):
        self.mark = mark  # mark(action, phase, step)
        self.guard = guard if guard is not None else Guard({}, step=lambda: self.step)
        self.guard.stops("phases", self.stop)
        self.on = True  # False once a failure turned phases off: every hook returns at once
        self.step = 0
        self.phase = OTHER
        self.depth = threading.local()
        self.models = weakref.WeakSet()  # outermost modules seen in forward: for names
        self.optimizers = weakref.WeakSet()
        self.handles = []  # module hooks (removable at any time: torch copies them before a call)
        self.global_hooks = []  # the global module hooks, until the first step narrows them
        self.opt_handles = []
        self.warning_filter = None  # the filter for torch.compile's warning about our global hooks
        self.patched = []  # (object, name, original, wrapper)
        # One-shot callables run on the training thread right after the next optimizer step (its
        # step mark written): what must see the step's gradients and optimizer state alive.
        self.after_step = []
        # Called with (step, args, kwargs) at each outermost forward (inputs.py's at_forward): the
        # global hooks see no keyword arguments, the models' own hooks (after the narrow) do.
        self.on_input = None

    def set(self, phase, action=ACTION["phase"]):
        self.phase = phase
        self.mark(action, phase, self.step)

    # -- the hooks: flat, guarded, never raising ----------------------------------------------

    def pre(self, mod, args, kwargs=None):
        if not self.on:
            return
        try:
            d = getattr(self.depth, "n", 0)
            self.depth.n = d + 1
            if d == 0:
                self.models.add(mod)
                if self.phase != BACKWARD:
                    self.set(FORWARD)
                if self.on_input is not None:
                    self.on_input(self.step, args, kwargs)  # inputs.py: guarded there, once a step
        except Exception as e:
            self.guard.fail("phases", e)

    def post(self, mod, args, out):
        if not self.on:
            return
        try:
            d = getattr(self.depth, "n", 1) - 1
            self.depth.n = d
            if d == 0 and self.phase == FORWARD:
                self.set(OTHER)
        except Exception as e:
            self.guard.fail("phases", e)

    def opt_pre(self, opt, args, kwargs):
        if not self.on:
            return
        try:
            self.optimizers.add(opt)
            self.set(OPTIMIZER)
        except Exception as e:
            self.guard.fail("phases", e)

    def opt_post(self, opt, args, kwargs):
        if self.on:
            try:
                self.step += 1
                if self.global_hooks and len(self.models) > 0:
                    self._narrow()
                self.set(OTHER, ACTION["step"])
            except Exception as e:
                self.guard.fail("phases", e)
        # What waits for a step (names at_step) runs with phases on or off, each guarded alone.
        while self.after_step:
            try:
                fn = self.after_step.pop(0)
            except IndexError:  # taken back by the thread that queued it, just now
                break
            self.guard.call("after_step", fn)

    def enter_backward(self):
        """The phase to go back to after backward, or None where phases are off."""
        if not self.on:
            return None
        try:
            before = self.phase
            self.set(BACKWARD)
            return before
        except Exception as e:
            self.guard.fail("phases", e)
            return None

    def leave_backward(self, before):
        if not self.on:
            return
        try:
            self.set(before if before != BACKWARD else OTHER)
        except Exception as e:
            self.guard.fail("phases", e)

    # -- installing and turning off ------------------------------------------------------------

    def install(self, torch):
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        theirs = getattr(nn_module, "_has_any_global_hook", lambda: True)()
        self.global_hooks = [nn_module.register_module_forward_pre_hook(self.pre), nn_module.register_module_forward_hook(self.post)]
        self.handles += self.global_hooks
        if not theirs:
            warnings.filterwarnings("ignore", message=COMPILE_GLOBAL_HOOKS_WARNING, category=UserWarning)
            self.warning_filter = warnings.filters[0]
        self.opt_handles.append(optim.register_optimizer_step_pre_hook(self.opt_pre))
        self.opt_handles.append(optim.register_optimizer_step_post_hook(self.opt_post))
        self.wrap_autograd(torch.autograd)

    def wrap_autograd(self, autograd):
        """backward and grad of `autograd` (torch.autograd) wrapped: the backward phase around
        torch's own call, whose result and exceptions pass through untouched."""
        for name in ("backward", "grad"):
            original = getattr(autograd, name)
            enter, leave = self.enter_backward, self.leave_backward

            @functools.wraps(original)
            def wrapped(*a, __original=original, **k):
                before = enter()
                try:
                    return __original(*a, **k)
                finally:
                    if before is not None:
                        leave(before)

            setattr(autograd, name, wrapped)
            self.patched.append((autograd, name, original, wrapped))

    def _narrow(self):
        for h in self.global_hooks:
            h.remove()
            self.handles.remove(h)
        self.global_hooks = []
        self._drop_warning_filter()
        for model in list(self.models):
            try:  # with its keyword arguments: model(input_ids=x) is how transformers are called
                self.handles.append(model.register_forward_pre_hook(self.pre, with_kwargs=True))
            except TypeError:  # a torch before with_kwargs (2.0)
                self.handles.append(model.register_forward_pre_hook(self.pre))
            self.handles.append(model.register_forward_hook(self.post))

    def stop(self):
        """Phases off after a failure: no more marks (the ring says "other" from here), the module
        hooks removed and backward/grad given back. The optimizer hooks stay registered but return
        at once: torch walks their dict lazily while calling them, and removing one there would
        raise into the step."""
        self.on = False
        try:
            self.phase = OTHER
            self.mark(ACTION["phase"], OTHER, self.step)
        except Exception:
            pass
        self._remove_module_hooks()
        self._unpatch()

    def _remove_module_hooks(self):
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.handles, self.global_hooks = [], []
        self._drop_warning_filter()

    def _drop_warning_filter(self):
        f, self.warning_filter = self.warning_filter, None
        if f is None:
            return
        try:
            warnings.filters.remove(f)
        except ValueError:  # the program reset the filters itself: nothing of ours is left there
            return
        # "ignore" leaves no trace in the modules' warning registries; this only keeps them current.
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()

    def _unpatch(self):
        unpatch(self.patched)
        self.patched = []

    def uninstall(self):
        self._remove_module_hooks()
        for h in self.opt_handles:
            h.remove()
        self.opt_handles = []
        self._unpatch()
