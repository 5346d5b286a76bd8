"""Phases and steps without a change to user code: global module forward hooks (outermost calls
only), torch.autograd.backward/grad wrapped, global optimizer step hooks. Each transition is one
call into the hook (a mark in the ring); nothing happens per allocator event here.
"""
import functools
import threading
import weakref

OTHER, FORWARD, BACKWARD, OPTIMIZER = 0, 1, 2, 3
ACTION_PHASE, ACTION_STEP = 16, 17


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

    def set(self, phase, action=ACTION_PHASE):
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

        self.handles.append(nn_module.register_module_forward_pre_hook(pre))
        self.handles.append(nn_module.register_module_forward_hook(post))

        def opt_pre(opt, args, kwargs):
            self.optimizers.add(opt)
            self.set(OPTIMIZER)

        def opt_post(opt, args, kwargs):
            self.step += 1
            self.set(OTHER, ACTION_STEP)

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
