"""Names for live blocks: parameters by qualified name, their gradients, optimizer state, buffers
(cheap: walks the models and optimizers the phase hooks saw), and on request every live CUDA
tensor found by a MemReporter-style scan (costlier: walks the garbage collector's objects).
Keyed by storage address, the address of the allocator block; a storage shared by views is
counted once.

What real training holds is named where it has CUDA memory of its own and skipped where it has
none, never raising: a DTensor (FSDP2, tensor parallel) and other wrapper subclasses by their local
tensors (`__tensor_flatten__`), sparse tensors by their values and indices, storages resized to
zero (FSDP's freed unsharded parameters) and storages whose pointer cannot be read skipped, meta
and fake tensors skipped, CPU, pinned and offloaded tensors skipped (only CUDA blocks are named).
A tensor that fails in any other way is skipped and counted (Walk.skipped); only a failure of the
walk itself (a model that cannot list its parameters) reaches the caller.
"""
import gc
import time

from .protocol import Category  # the words the monitor knows (src/profiler/categories.ts)

MAX_DEPTH = 4  # wrapper subclasses inside wrapper subclasses: deeper is not a tensor we can name
# The parts of a sparse tensor that hold memory, by layout: COO's, then the compressed layouts'
# (CSR/BSR: crow and col indices; CSC/BSC: ccol and row indices).
SPARSE_COO = ("_values", "_indices")
SPARSE_COMPRESSED = ("values", "crow_indices", "col_indices", "ccol_indices", "row_indices")


def _part(name, part):
    return None if name is None else "%s (%s)" % (name, part)


class Walk:
    """One naming walk: entries by storage address, and how many tensors were skipped on a failure."""

    def __init__(self):
        self.out = {}
        self.skipped = 0

    def add(self, t, name, category, depth=0):
        if t is None:
            return
        try:
            self._add(t, name, category, depth)
        except Exception:
            self.skipped += 1  # one odd tensor: the others are still named

    def _add(self, t, name, category, depth):
        if depth > MAX_DEPTH:
            self.skipped += 1
            return
        cls = type(t)
        # A fake tensor (torch.compile's tracing) says "cuda" and owns no memory.
        if cls.__name__ == "FakeTensor" or getattr(t, "is_meta", False):
            return
        local = getattr(t, "_local_tensor", None)  # DTensor: this rank's shard
        if local is not None:
            return self._add(local, name, category, depth + 1)
        flatten = getattr(cls, "__tensor_flatten__", None)
        if flatten is not None:
            # A wrapper subclass (quantized weights, nested jagged...): its inner tensors hold the memory.
            attrs = flatten(t)[0]  # attribute names (early versions of the protocol: {name: tensor})
            inner = list(attrs.items()) if isinstance(attrs, dict) else [(a, getattr(t, a, None)) for a in attrs]
            for attr, x in inner:
                self.add(x, name if len(inner) == 1 else _part(name, attr), category, depth + 1)
            return
        if not getattr(t, "is_cuda", False):
            return  # CPU, pinned, offloaded: only CUDA blocks are named
        layout = str(t.layout)
        if layout != "torch.strided":
            parts = SPARSE_COO if layout == "torch.sparse_coo" else SPARSE_COMPRESSED
            for p in parts:
                try:
                    inner = getattr(t, p)()
                except Exception:  # not this layout's part (CSR has no ccol_indices)
                    continue
                self.add(inner, _part(name, p.strip("_")), category, depth + 1)
            return
        s = t.untyped_storage()
        size = s.nbytes()
        if size == 0:
            return  # resized to zero (FSDP's unsharded parameter between uses): no block
        try:
            address = s.data_ptr()
        except RuntimeError:
            return  # a storage Python can no longer read (freed under us): no block to name
        if not address or address in self.out:
            return
        self.out[address] = {
            "address": address,
            "size": size,
            "name": name,
            "category": category,
            "shape": list(t.shape),
            "dtype": str(t.dtype).replace("torch.", ""),
            "device": t.device.index,
        }


def _all_named_parameters(model):
    """(name, parameter) for every name a parameter has: a tied one (GPT-2's lm_head.weight is
    transformer.wte.weight) comes once per module that holds it. torch lists it once by default."""
    try:
        return list(model.named_parameters(remove_duplicate=False))
    except TypeError:  # a module (or torch) without remove_duplicate
        return list(model.named_parameters())


def _data_key(t):
    """Where a parameter's elements are: the same for two Parameters over the same data, not for
    views of one flat buffer (those share a storage at different offsets or shapes)."""
    try:
        address = t.data_ptr() if hasattr(t, "data_ptr") else t.untyped_storage().data_ptr()
        return (address, tuple(t.shape)) if address else None
    except Exception:  # no data we can read (meta, a wrapper subclass): tied by object only
        return None


def _tied_names(model):
    """[(name, parameter, other names)] with each parameter once, under its first name; the other
    names are those it is tied to, by object (one Parameter held twice) or by data (two
    Parameters over the same elements)."""
    named = _all_named_parameters(model)
    by_key = {}
    order = []
    for name, p in named:
        data = _data_key(p)
        key = ("data", data) if data else ("object", id(p))
        if key not in by_key:
            by_key[key] = []
            order.append(key)
        by_key[key].append((name, p))
    out = []
    for key in order:
        group = by_key[key]
        for name, p in group:
            others = [n for n, _ in group if n != name]
            # each Parameter object once, under the first name it has; its aliases said beside
            if name == next(n for n, q in group if q is p):
                out.append((name, p, others))
    return out


MAX_TIED_NAMES = 3  # a name stays a line: more ties are counted


def _grad_name(name, tied):
    if not tied:
        return name + ".grad"
    more = len(tied) - MAX_TIED_NAMES
    listed = ", ".join(tied[:MAX_TIED_NAMES]) + (" and %d more" % more if more > 0 else "")
    return "%s.grad (tied: %s)" % (name, listed)


def known_walk(models, optimizers):
    """Parameters, gradients, buffers and optimizer state of the models and optimizers: a Walk."""
    w = Walk()
    param_names = {}
    for model in list(models):
        for name, p, tied in _tied_names(model):
            param_names.setdefault(id(p), name)
            w.add(p, name, Category.parameter)
            # A tied parameter's gradient is its own block: named with the names it is tied to.
            w.add(getattr(p, "grad", None), _grad_name(name, tied), Category.gradient)
        for name, b in model.named_buffers():
            w.add(b, name, Category.buffer)
    for opt in list(optimizers):
        for group in opt.param_groups:
            for p in group["params"]:
                pname = param_names.get(id(p), "param@%x" % id(p))
                w.add(p, pname, Category.parameter)
                w.add(getattr(p, "grad", None), pname + ".grad", Category.gradient)
                for key, value in opt.state.get(p, {}).items():
                    if hasattr(value, "untyped_storage"):
                        w.add(value, "%s of %s" % (key, pname), Category.optimizer_state)
    return w


def known_names(models, optimizers):
    """{storage address: entry} of what known_walk names."""
    return known_walk(models, optimizers).out


def scan_walk(torch, models, optimizers):
    """Every live CUDA tensor: known names first, then the rest as found (category other)."""
    w = known_walk(models, optimizers)
    for obj in gc.get_objects():
        try:
            if not torch.is_tensor(obj):
                continue
        except Exception:  # objects that fail on attribute access are skipped
            continue
        w.add(obj, None, Category.other)
    return w


def scan(torch, models, optimizers):
    """(entries, milliseconds) of scan_walk."""
    t0 = time.perf_counter()
    w = scan_walk(torch, models, optimizers)
    return list(w.out.values()), (time.perf_counter() - t0) * 1000
