"""pytorch_memlab's MemReporter and Courtesy, from the allocator's side.

report(): every live CUDA tensor Python can reach, one row per storage (views of one storage are
one allocation, counted once), named from the models and optimizers, totals per device, and the
difference from torch.cuda.memory_allocated() explained: the allocator rounds each request up to
a 512-byte block, and some blocks belong to no tensor Python can see (tensors autograd saved for
backward, library workspaces, tensors only C++ holds).

Courtesy: moves this process's CUDA tensors to host memory and empties the cache, so another
process can have the GPU for a while; puts them back on exit. Tensors keep their identity
(Parameters stay the optimizer's), views keep sharing their storage.
"""
import gc
import sys

from . import tensor_names
from .lines import _fmt
from .totals import block_size


def _models(agent, model):
    ms = [] if model is None else [model]
    if agent is not None and agent.phases is not None:
        ms += [m for m in list(agent.phases.models) if m is not model]
    return ms


def report(agent, model=None, device=None, file=None):
    import torch

    optimizers = list(agent.phases.optimizers) if agent is not None and agent.phases is not None else []
    entries, scan_ms = tensor_names.scan(torch, _models(agent, model), optimizers)
    if device is not None:
        device = torch.device(device).index if not isinstance(device, int) else device
        entries = [e for e in entries if e["device"] == device]
    entries.sort(key=lambda e: (e["device"], -e["size"]))
    out = file or sys.stdout
    rows = []
    for dev in sorted({e["device"] for e in entries} | ({device} if device is not None else set())):
        mine = [e for e in entries if e["device"] == dev]
        tensor_bytes = sum(e["size"] for e in mine)
        block_bytes = sum(block_size(e["size"]) for e in mine)
        allocated = torch.cuda.memory_allocated(dev)
        out.write("cuda:%d  %d storages, %s\n" % (dev, len(mine), _fmt(tensor_bytes)))
        out.write("  %-48s %-10s %-20s %12s\n" % ("name", "category", "shape / dtype", "size"))
        for e in mine:
            label = e["name"] or "(unnamed)"
            out.write("  %-48s %-10s %-20s %12s\n" % (label[-48:], e["category"][:10], ("%s %s" % (tuple(e["shape"]), e["dtype"]))[:20], _fmt(e["size"])))
            rows.append(e)
        out.write("  tensors %s; rounded up to allocator blocks %s (+%s)\n" % (_fmt(tensor_bytes), _fmt(block_bytes), _fmt(block_bytes - tensor_bytes)))
        out.write("  memory_allocated() %s: %s in blocks no Python tensor holds (saved for backward, workspaces, C++-only tensors)\n\n"
                  % (_fmt(allocated), _fmt(allocated - block_bytes)))
    if not rows:
        out.write("no live CUDA tensors%s\n" % ("" if device is None else " on cuda:%d" % device))
    out.write("(scan took %.1f ms)\n" % scan_ms)
    return rows


class Courtesy:
    def __init__(self, agent, device=None):
        self.agent = agent
        self.device = device
        self.moved = []
        self.moved_bytes = 0
        self.released_bytes = 0
        self.skipped = 0

    def __enter__(self):
        import torch

        devices = range(torch.cuda.device_count()) if self.device is None else [torch.device("cuda", self.device).index if isinstance(self.device, int) else torch.device(self.device).index]
        torch.cuda.synchronize()
        before = sum(torch.cuda.memory_reserved(d) for d in devices)
        host = {}  # CUDA storage address -> its host copy
        self.skipped = 0
        try:
            for obj in gc.get_objects():
                try:
                    if not (torch.is_tensor(obj) and obj.is_cuda and obj.device.index in devices):
                        continue
                    if obj.layout != torch.strided or hasattr(type(obj), "__tensor_flatten__") or type(obj).__name__ == "FakeTensor":
                        # sparse layouts have no single storage to move; a wrapper subclass (DTensor)
                        # moves with its inner tensors, found on their own; a fake tensor has none
                        self.skipped += 1
                        continue
                    st = obj.untyped_storage()
                    if st.nbytes() == 0:
                        continue  # resized to zero (FSDP's freed parameters): nothing to move
                    key = st.data_ptr()
                except Exception:
                    continue
                if key not in host:
                    host[key] = st.cpu()
                    self.moved_bytes += st.nbytes()
                cpu = torch.empty(0, dtype=obj.dtype).set_(host[key], obj.storage_offset(), obj.size(), obj.stride())
                dev = obj.device.index
                obj.data = cpu
                self.moved.append((obj, dev))
        except BaseException:
            # Half moved is worse than not moved: put back what went, then let the error out.
            self.__exit__(None, None, None)
            raise
        del host
        st = obj = None  # the loop's last CUDA storage must not outlive the move
        gc.collect()
        torch.cuda.empty_cache()
        self.released_bytes = before - sum(torch.cuda.memory_reserved(d) for d in devices)
        return self

    def __exit__(self, *exc):
        import torch

        gpu = {}  # host storage address -> its CUDA copy
        for obj, dev in self.moved:
            st = obj.untyped_storage()
            key = st.data_ptr()
            if key not in gpu:
                gpu[key] = st.cuda(dev)
            obj.data = torch.empty(0, dtype=obj.dtype, device="cuda:%d" % dev).set_(gpu[key], obj.storage_offset(), obj.size(), obj.stride())
        self.moved = []
        return False
