"""Library marks: what the ledger of memory outside PyTorch ties each jump of NVML's used bytes to
(src/profiler/ledger.ts). A mark is a record_function range named `gpumem:LIBRARY:EVENT` around the
call that makes (or frees) memory outside torch's caching allocator; the hook already writes every
record_function range into the ring (RANGE_ENTER / RANGE_EXIT, names in the manifest), so a mark is
two records and nothing new on the wire. The monitor samples NVML and gives the change of NVML used
− reserved across the mark to its library.

Marked here, once per event and never per allocation:
  nccl        init_process_group (":eager" where a device_id makes the communicator there),
              new_group, the first collective of each group (NCCL makes a group's communicator at
              its first collective: "first_collective:all_reduce"), destroy_process_group
  cudagraphs  a CUDA graph's capture_end (the graph is instantiated there: driver memory outside
              the graph's private pool)
  triton      a torch.compile compile (dynamo's start and end callbacks: Inductor's autotuning runs
              and loads Triton's kernels there), registered at torch.compile's first call
A program marks its own library events the same way, with or without the agent:

    with torch.profiler.record_function("gpumem:cupy:pool_init"):
        ...

Each wrapper calls the original with the program's arguments and returns its result; its own work
is guarded (guard.py): a failure turns the feature off ("libraries" in the notes), never reaches the
program, and the original is still called. Inside a torch.compile trace a wrapper calls the
original at once, so dynamo sees (and maps) the collective it knows.
"""
import functools
import inspect
import sys

from .guard import unpatch

FEATURE = "libraries"
PREFIX = "gpumem:"

# The collectives whose first call on a group makes its NCCL communicator (torch.distributed's
# names; the private ones are those DistributedDataParallel's constructor calls).
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "broadcast", "reduce", "gather", "scatter", "barrier",
    "all_gather_object", "broadcast_object_list", "all_reduce_coalesced", "send", "recv", "isend", "irecv",
    "batch_isend_irecv", "_broadcast_coalesced", "_verify_params_across_processes",
)
# Groups remembered at most: a program making groups in a loop does not grow the agent without bound.
MAX_GROUPS = 4096


def _compiling(torch):
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    return fn or (lambda: False)


def _group_index(fn):
    """Where `group` (or `process_group`) comes among fn's positional parameters; None: keyword only or none."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a C function without a signature
        return None
    for name in ("group", "process_group"):
        if name in params:
            return params.index(name)
    return None


class Libraries:
    def __init__(self, torch, guard):
        self.torch = torch
        self.guard = guard
        self.on = True
        self.compiling = _compiling(torch)
        self.record_function = torch.profiler.record_function
        self.seen = set()  # ids of the groups whose first collective was marked (None: the default group)
        self.patched = []  # (module, name, original, wrapper)
        self.count = 0  # marks written (tests, facts)
        self.compile_watched = False  # dynamo's compile callbacks registered
        self.compiling_ranges = []
        self.compile_handler = None
        guard.stops(FEATURE, self.stop)

    def _mark(self, name):
        """The mark's range, or None where the feature is off (a failure is the guard's)."""
        if not self.on:
            return None
        try:
            r = self.record_function(PREFIX + name)
            r.__enter__()
            self.count += 1
            return r
        except Exception as e:
            self.guard.fail(FEATURE, e)
            return None

    def _end(self, r):
        if r is not None:
            try:
                r.__exit__(None, None, None)
            except Exception as e:
                self.guard.fail(FEATURE, e)

    def _call(self, name, fn, args, kwargs):
        r = self._mark(name)
        try:
            return fn(*args, **kwargs)
        finally:
            self._end(r)

    # -- what each wrapper decides (guarded: a failure calls the original unmarked) --------------

    def _event_of(self, kind, fn, index, args, kwargs):
        if not self.on or self.compiling():
            return None
        try:
            if kind == "init":
                return "nccl:init_process_group" + (":eager" if kwargs.get("device_id") is not None else "")
            if kind == "new_group":
                return "nccl:new_group" + (":eager" if kwargs.get("device_id") is not None else "")
            if kind == "destroy":
                return "nccl:destroy_process_group"
            group = kwargs.get("group", kwargs.get("process_group"))
            if group is None and index is not None and len(args) > index:
                group = args[index]
            key = None if group is None else id(group)
            if key in self.seen or len(self.seen) >= MAX_GROUPS:
                return None
            self.seen.add(key)
            return "nccl:first_collective:" + fn.__name__.lstrip("_")
        except Exception as e:
            self.guard.fail(FEATURE, e)
            return None

    def _wrap(self, module, name, kind):
        fn = getattr(module, name, None)
        if fn is None or getattr(fn, "_gpumem_library_mark", False):
            return
        index = _group_index(fn) if kind == "collective" else None
        this = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            event = this._event_of(kind, fn, index, args, kwargs)
            if event is None:
                return fn(*args, **kwargs)
            if kind == "destroy":
                this.seen.clear()  # the groups go: a new group may take an old one's id
            return this._call(event, fn, args, kwargs)

        wrapper._gpumem_library_mark = True
        setattr(module, name, wrapper)
        self.patched.append((module, name, fn, wrapper))

    def install(self):
        dist = sys.modules.get("torch.distributed")
        if dist is None:
            try:
                import torch.distributed as dist  # torch imports it itself (torch.nn.parallel)
            except Exception:
                dist = None
        if dist is not None and getattr(dist, "is_available", lambda: False)():
            c10d = sys.modules.get("torch.distributed.distributed_c10d")
            # Both names of each function: code calls dist.all_reduce and distributed_c10d.all_reduce.
            for module in [m for m in (dist, c10d) if m is not None]:
                self._wrap(module, "init_process_group", "init")
                self._wrap(module, "new_group", "new_group")
                self._wrap(module, "destroy_process_group", "destroy")
                for name in COLLECTIVES:
                    self._wrap(module, name, "collective")
        graphs = sys.modules.get("torch.cuda.graphs")
        graph = getattr(graphs, "CUDAGraph", None)
        if graph is not None and "capture_end" in vars(graph):
            end = graph.capture_end

            @functools.wraps(end)
            def capture_end(graph_self, *args, **kwargs):
                if not self.on:
                    return end(graph_self, *args, **kwargs)
                return self._call("cudagraphs:capture_end", end, (graph_self,) + args, kwargs)

            graph.capture_end = capture_end
            self.patched.append((graph, "capture_end", end, capture_end))
        self._watch_compile()
        return self

    # -- torch.compile: the compile (Inductor's autotuning, Triton's kernels loaded) ----------------

    def _watch_compile(self):
        """Dynamo's compile start and end callbacks, once torch._dynamo is imported: torch.compile
        imports it at its first call, so that call registers them (torch.compile itself is left
        alone where dynamo is already loaded)."""
        dynamo = sys.modules.get("torch._dynamo.callback")
        if dynamo is not None:
            self._register_compile(dynamo)
            return
        compile_fn = getattr(self.torch, "compile", None)
        if compile_fn is None or getattr(compile_fn, "_gpumem_library_mark", False):
            return
        this = self

        @functools.wraps(compile_fn)
        def compile(*args, **kwargs):
            out = compile_fn(*args, **kwargs)
            if this.on and not this.compile_watched:
                cb = sys.modules.get("torch._dynamo.callback")
                if cb is not None:
                    this.guard.call(FEATURE, this._register_compile, cb)
            return out

        compile._gpumem_library_mark = True
        self.torch.compile = compile
        self.patched.append((self.torch, "compile", compile_fn, compile))

    def _register_compile(self, cb):
        handler = getattr(cb, "callback_handler", None)
        if handler is None or not hasattr(handler, "register_start_callback"):
            return
        self.compile_watched = True
        self.compiling_ranges = []
        handler.register_start_callback(self._compile_start)
        handler.register_end_callback(self._compile_end)
        self.compile_handler = handler

    def _compile_start(self, *args):
        r = self._mark("triton:compile")
        if r is not None:
            self.compiling_ranges.append(r)

    def _compile_end(self, *args):
        if self.compiling_ranges:
            self._end(self.compiling_ranges.pop())

    def stop(self):
        """Off after a failure: the originals back where nothing replaced our wrappers since."""
        self.on = False
        unpatch(self.patched)
        self.patched = []
        h, self.compile_handler = self.compile_handler, None
        for name, fn in (("remove_start_callback", self._compile_start), ("remove_end_callback", self._compile_end)):
            try:
                getattr(h, name)(fn)
            except Exception:
                pass  # this torch cannot remove them: they return at once now (`on` is off)


def start(torch, notes, guard):
    """The library marks installed; None (with a note) where this torch has no record_function."""
    if getattr(getattr(torch, "profiler", None), "record_function", None) is None:
        notes[FEATURE] = "off: this torch has no torch.profiler.record_function"
        return None
    return Libraries(torch, guard).install()
