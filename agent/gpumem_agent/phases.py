"""Phases and steps without a change to user code: module forward hooks (outermost calls only),
torch.autograd.backward/grad wrapped, global optimizer step hooks. Each transition is one call
into the hook (a mark in the ring); nothing happens per allocator event here.

Global module hooks send every module call in the process down PyTorch's slow path, so they stay
only until the first optimizer step: by then the outermost modules (the models) are known, and
hooks on those alone take over. A model first called after that step has no forward phase.
"""
import functools
import threading
import weakref

from .wire import ACTION, PHASE

OTHER, FORWARD, BACKWARD, OPTIMIZER = PHASE["other"], PHASE["forward"], PHASE["backward"], PHASE["optimizer"]


class Phases:
    def __init__(self, mark):
        self.mark = mark  # mark(action, phase, step)
        self.step = 0
        self.phase = OTHER
        self.depth = threading.local()
        self.models = weakref.WeakSet()  # outermost modules seen in forward: for names
        self.optimizers = weakref.WeakSet()
        self.handles = []
        self.patched = []
        # One-shot callables run on the training thread right after the next optimizer step (its
        # step mark written): what must see the step's gradients and optimizer state alive.
        self.after_step = []

    def set(self, phase, action=ACTION["phase"]):
        self.phase = phase
        self.mark(action, phase, self.step)

    def install(self, torch):
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        def pre(mod, args):
            d = getattr(self.depth, "n", 0)
            self.depth.n = d + 1
            if d == 0:
                self.models.add(mod)
                if self.phase != BACKWARD:
                    self.set(FORWARD)

        def post(mod, args, out):
            d = getattr(self.depth, "n", 1) - 1
            self.depth.n = d
            if d == 0 and self.phase == FORWARD:
                self.set(OTHER)

        global_hooks = [nn_module.register_module_forward_pre_hook(pre), nn_module.register_module_forward_hook(post)]
        self.handles += global_hooks

        def narrow():
            for h in global_hooks:
                h.remove()
                self.handles.remove(h)
            for model in list(self.models):
                self.handles.append(model.register_forward_pre_hook(pre))
                self.handles.append(model.register_forward_hook(post))

        def opt_pre(opt, args, kwargs):
            self.optimizers.add(opt)
            self.set(OPTIMIZER)

        def opt_post(opt, args, kwargs):
            self.step += 1
            if global_hooks[0] in self.handles and len(self.models) > 0:
                narrow()
            self.set(OTHER, ACTION["step"])
            while self.after_step:
                self.after_step.pop(0)()

        self.handles.append(optim.register_optimizer_step_pre_hook(opt_pre))
        self.handles.append(optim.register_optimizer_step_post_hook(opt_post))

        for name in ("backward", "grad"):
            original = getattr(torch.autograd, name)

            @functools.wraps(original)
            def wrapped(*a, __original=original, **k):
                before = self.phase
                self.set(BACKWARD)
                try:
                    return __original(*a, **k)
                finally:
                    self.set(before if before != BACKWARD else OTHER)

            setattr(torch.autograd, name, wrapped)
            self.patched.append((torch.autograd, name, original))

    def uninstall(self):
        for h in self.handles:
            h.remove()
        for obj, name, original in self.patched:
            setattr(obj, name, original)
        self.handles, self.patched = [], []
