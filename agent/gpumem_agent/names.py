"""Names for live blocks: parameters by qualified name, their gradients, optimizer state, buffers
(cheap: walks the models and optimizers the phase hooks saw), and on request every live CUDA
tensor found by a MemReporter-style scan (costlier: walks the garbage collector's objects).
Keyed by storage address, the address of the allocator block; a storage shared by views is
counted once.
"""
import gc
import time


def _entry(t, name, category):
    s = t.untyped_storage()
    return {
        "address": s.data_ptr(),
        "size": s.nbytes(),
        "name": name,
        "category": category,
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "device": t.device.index,
    }


def known_names(models, optimizers):
    out = {}

    def add(t, name, category):
        if t is None or not getattr(t, "is_cuda", False):
            return
        e = _entry(t, name, category)
        out.setdefault(e["address"], e)

    param_names = {}
    for model in list(models):
        for name, p in model.named_parameters():
            param_names[id(p)] = name
            add(p, name, "parameter")
            add(p.grad, name + ".grad", "gradient")
        for name, b in model.named_buffers():
            add(b, name, "buffer")
    for opt in list(optimizers):
        for group in opt.param_groups:
            for p in group["params"]:
                pname = param_names.get(id(p), "param@%x" % id(p))
                add(p, pname, "parameter")
                add(p.grad, pname + ".grad", "gradient")
                for key, value in opt.state.get(p, {}).items():
                    if hasattr(value, "untyped_storage"):
                        add(value, "%s of %s" % (key, pname), "optimizer_state")
    return out


def scan(torch, models, optimizers):
    """Every live CUDA tensor: known names first, then the rest as found (category 'other')."""
    t0 = time.perf_counter()
    out = known_names(models, optimizers)
    for obj in gc.get_objects():
        try:
            if not (torch.is_tensor(obj) and obj.is_cuda):
                continue
        except Exception:  # objects that fail on attribute access are skipped
            continue
        e = _entry(obj, None, "other")
        out.setdefault(e["address"], e)
    return list(out.values()), (time.perf_counter() - t0) * 1000
