"""A stand-in for torch.distributed's entry points the agent's library marks wrap (libraries.py),
for its tests on a machine without torch: the same names and parameters as torch's (the group found
by its parameter's place), each call recorded in `calls` and answered as torch would with one rank.
`install(torch)` puts it in sys.modules as torch.distributed (and distributed_c10d: the same
functions under both names, as torch has them)."""
import sys
import types

calls = []
_groups = []


class Group:
    def __init__(self, ranks):
        self.ranks = ranks


def is_available():
    return True


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None, group_name="", pg_options=None, device_id=None):
    calls.append(("init_process_group", backend))


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False, group_desc=None, device_id=None):
    g = Group(ranks)
    _groups.append(g)
    calls.append(("new_group", ranks))
    return g


def destroy_process_group(group=None):
    calls.append(("destroy_process_group", group))


def all_reduce(tensor, op=None, group=None, async_op=False):
    calls.append(("all_reduce", group))
    if tensor == "fail":
        raise RuntimeError("NCCL error: unhandled system error")
    return tensor


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    calls.append(("broadcast", group))
    return tensor


def barrier(group=None, async_op=False, device_ids=None):
    calls.append(("barrier", group))


def install(torch):
    names = ("is_available", "init_process_group", "new_group", "destroy_process_group", "all_reduce", "broadcast", "barrier", "Group")
    fns = {n: globals()[n] for n in names}
    c10d = types.ModuleType("torch.distributed.distributed_c10d")
    c10d.__dict__.update(fns)
    dist = types.ModuleType("torch.distributed")
    dist.__dict__.update(fns, distributed_c10d=c10d)
    sys.modules["torch.distributed"] = dist
    sys.modules["torch.distributed.distributed_c10d"] = c10d
    torch.distributed = dist
    return dist
