"""A stand-in for the few parts of torch the agent touches, for its tests on a machine without torch:
CUDA's queries, the module and optimizer hook registries (called as torch calls them), autograd's
entry points, record_function, and tensors whose storage is a block of a pretend allocator. Every
allocation and free, and every record_function range, goes to the hook double
(test/support/hook_double.c, path in GPUMEM_TEST_HOOK_DOUBLE) as PyTorch's callbacks would go to
the hook. `install()` puts it in sys.modules as `torch`; nothing of the agent is replaced.
"""
import contextlib
import ctypes
import os
import sys
import types

ALLOC, FREE_REQUESTED, FREE_COMPLETED, OOM = 0, 1, 2, 8
_lib = None


def _hook():
    global _lib
    if _lib is None:
        # The same library the agent loads (one dlopen). CDLL releases the GIL around each call, as
        # PyTorch does around its ops: the allocator's trackers run without it.
        _lib = ctypes.CDLL(os.environ["GPUMEM_TEST_HOOK_DOUBLE"])
        _lib.gpumem_double_event.argtypes = [ctypes.c_uint8, ctypes.c_int8, ctypes.c_uint64, ctypes.c_uint64]
        _lib.gpumem_double_range_enter.argtypes = [ctypes.c_char_p]
    return _lib


class OutOfMemoryError(RuntimeError):
    """torch.cuda.OutOfMemoryError's stand-in."""


class _Allocator:
    """Blocks of 512-byte multiples at increasing addresses (no reuse: a name never meets a stranger).
    A request above `limit` bytes (None: no limit) is an out-of-memory error, recorded as PyTorch's is."""

    next = 0x7F0000000000
    limit = None

    @classmethod
    def alloc(cls, nbytes):
        if cls.limit is not None and nbytes > cls.limit:
            _hook().gpumem_double_event(OOM, 0, cls.limit, nbytes)  # the free bytes, then the request
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes (the double's limit is %d)" % (nbytes, cls.limit))
        size = max(512, (nbytes + 511) // 512 * 512)
        address, cls.next = cls.next, cls.next + size
        _hook().gpumem_double_event(ALLOC, 0, address, size)
        return address, size

    @staticmethod
    def free(address, size):
        _hook().gpumem_double_event(FREE_REQUESTED, 0, address, size)
        _hook().gpumem_double_event(FREE_COMPLETED, 0, address, size)


class _Storage:
    def __init__(self, nbytes):
        self._address, self._size = _Allocator.alloc(nbytes)

    def data_ptr(self):
        return self._address

    def nbytes(self):
        return self._size

    def __del__(self):
        if hasattr(self, "_address"):  # not where the allocation raised (out of memory)
            _Allocator.free(self._address, self._size)


class _Device:
    type = "cuda"
    index = 0


class Tensor:
    is_cuda = True
    is_meta = False
    layout = "torch.strided"
    dtype = "torch.float32"
    device = _Device()

    def __init__(self, *shape):
        self.shape = tuple(shape)
        n = 4
        for s in shape:
            n *= s
        self._storage = _Storage(n)
        self.grad = None
        self.requires_grad = False
        self._hooks = []  # register_hook's: called by the double's backward with no gradient

    def register_hook(self, fn):
        return _Handle(self._hooks, fn)

    def untyped_storage(self):
        return self._storage


class Parameter(Tensor):
    pass


class _Handle:
    def __init__(self, registry, fn):
        self.registry, self.fn = registry, fn
        registry.append(fn)

    def remove(self):
        if self.fn in self.registry:
            self.registry.remove(self.fn)


_global_pre, _global_post, _step_pre, _step_post = [], [], [], []


class Module:
    def __init__(self):
        self._pre, self._post = [], []

    def register_forward_pre_hook(self, fn):
        return _Handle(self._pre, fn)

    def register_forward_hook(self, fn):
        return _Handle(self._post, fn)

    def __call__(self, *args):
        for fn in list(_global_pre) + list(self._pre):
            fn(self, args)
        out = self.forward(*args)
        for fn in list(self._post) + list(_global_post):
            fn(self, args, out)
        return out

    def named_parameters(self):
        for name, v in vars(self).items():
            if isinstance(v, Parameter):
                yield name, v
            elif isinstance(v, Module):
                for sub, p in v.named_parameters():
                    yield "%s.%s" % (name, sub), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self):
        return iter(())


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.state = {}

    def step(self):
        for fn in list(_step_pre):
            fn(self, (), {})
        self._step()
        for fn in list(_step_post):
            fn(self, (), {})

    def zero_grad(self, set_to_none=True):
        for p in self.param_groups[0]["params"]:
            p.grad = None


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


@contextlib.contextmanager
def record_function(name):
    _hook().gpumem_double_range_enter(name.encode())
    try:
        yield
    finally:
        _hook().gpumem_double_range_exit()


def _backward(loss, *a, **k):
    """The loss's tensor hooks (its gradient arrived), then its closure (the gradients), where it has one."""
    for fn in list(loss._hooks):
        fn(None)
    getattr(loss, "_backward", lambda: None)()


def install():
    """Make `import torch` (and the submodules the agent imports) this double."""
    cuda = _module(
        "torch.cuda",
        device_count=lambda: 1,
        is_available=lambda: True,
        is_initialized=lambda: True,
        memory_stats=lambda device=None: {},  # the header's totals come from the events alone
        synchronize=lambda device=None: None,
        get_device_properties=lambda i: types.SimpleNamespace(name="double", uuid=None),
        _lazy_call=lambda fn: fn(),
        OutOfMemoryError=OutOfMemoryError,
    )
    # backward(loss): the loss's own closure makes the gradients (the double has no graph).
    autograd = _module("torch.autograd", backward=_backward, grad=lambda *a, **k: None)
    module = _module("torch.nn.modules.module", Module=Module,
                     register_module_forward_pre_hook=lambda fn: _Handle(_global_pre, fn),
                     register_module_forward_hook=lambda fn: _Handle(_global_post, fn),
                     _has_any_global_hook=lambda: bool(_global_pre or _global_post))
    modules = _module("torch.nn.modules", module=module, Module=Module)
    nn = _module("torch.nn", modules=modules, Module=Module, Parameter=Parameter)
    optimizer = _module("torch.optim.optimizer", Optimizer=Optimizer,
                        register_optimizer_step_pre_hook=lambda fn: _Handle(_step_pre, fn),
                        register_optimizer_step_post_hook=lambda fn: _Handle(_step_post, fn))
    optim = _module("torch.optim", optimizer=optimizer, Optimizer=Optimizer)
    profiler = _module("torch.profiler", record_function=record_function)
    return _module("torch", __version__="0.0.0+double", cuda=cuda, autograd=autograd, nn=nn, optim=optim, profiler=profiler,
                   _C=types.SimpleNamespace(), Tensor=Tensor, is_tensor=lambda x: isinstance(x, Tensor),
                   empty=lambda *shape, **k: Tensor(*shape))


def hook_double_build(agent):
    """An agent's `_build` on the doubles: the hook double's library (GPUMEM_TEST_HOOK_DOUBLE),
    where the agent would build the hook against torch's headers."""
    agent._built = (os.environ["GPUMEM_TEST_HOOK_DOUBLE"], None)


def start_agent_on_doubles(torch):
    """The real agent started as a program's would be, on the doubles (the hook double where it would
    build the hook against torch's headers); the program ends in words where it did not take the hook."""
    import gpumem_agent
    from gpumem_agent.agent import Agent

    class AgentOnDouble(Agent):
        _build = hook_double_build

    agent = gpumem_agent._agent = AgentOnDouble(torch)
    agent.start()
    if agent.mode != "hook":
        sys.exit("the agent did not take the hook double: %s" % agent.hook_error)
    return agent


def toy_training(torch, lm_head=False, second_moment=False, step_temporary=False):
    """The test programs' model and optimizer on the double: (Model, AdamW). Parameters wte (4 MiB)
    and h0 (1 MiB), with lm_head (1 MiB) where asked; forward makes an activation that backward
    frees and a gradient per parameter; AdamW keeps exp_avg (and exp_avg_sq where asked) per
    parameter and, where asked, makes a temporary each step."""

    class Linear(torch.nn.Module):
        def __init__(self, rows, cols):
            super().__init__()
            self.weight = torch.nn.Parameter(rows, cols)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = Linear(4096, 256)
            self.h0 = Linear(512, 512)
            if lm_head:
                self.lm_head = Linear(1024, 256)

        def forward(self, x):
            hidden = torch.empty(64, 4096)  # an activation, freed by backward
            loss = torch.empty(1)
            loss.requires_grad = True

            def backward():
                nonlocal hidden
                for p in self.parameters():
                    p.grad = torch.empty(*p.shape)
                hidden = None

            loss._backward = backward
            return loss

    class AdamW(torch.optim.Optimizer):
        def _step(self):
            for p in self.param_groups[0]["params"]:
                if p not in self.state:
                    state = {"exp_avg": torch.empty(*p.shape)}
                    if second_moment:
                        state["exp_avg_sq"] = torch.empty(*p.shape)
                    self.state[p] = state
            if step_temporary:
                torch.empty(256, 256)

    return Model, AdamW
