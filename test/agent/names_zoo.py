"""What real training holds, named on a GPU without raising into the program: FSDP2 (DTensor
parameters, gradients and AdamW state, unsharded storages freed to zero) on a one-process group,
a storage resized to zero, meta and fake tensors, a pinned CPU tensor, sparse COO gradients and a
CSR tensor, a quantized tensor, a nested (jagged) tensor and a two-tensor wrapper subclass in the
optimizer state. Then a module whose named_buffers raises: names turn off, said in the notes, and
training goes on. A JSON report on stdout (test/agent/gpu.test.ts checks it).

    PYTHONPATH=agent python3 test/agent/names_zoo.py            # with the agent
    GPUMEM_TUI_DISABLE=1 PYTHONPATH=agent python3 test/agent/names_zoo.py   # without: same losses
"""
import json
import os
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch import nn

import gpumem_agent

gpumem_agent.attach()
dev = torch.device("cuda:0")
report = {"agent": gpumem_agent.current() is not None}


def control(cmd, **args):
    a = gpumem_agent.current()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(a.sock_path)
    s.sendall((json.dumps(dict(id=1, cmd=cmd, **args)) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 22)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def summary(reply):
    """What a names reply says, small enough to read in a report."""
    if not reply.get("ok"):
        return {"ok": False, "error": reply.get("error")}
    return {"ok": True, "skipped": reply.get("skipped"), "n": len(reply["tensors"]),
            "names": sorted("%s:%s" % (t["category"], t["name"]) for t in reply["tensors"] if t["name"])}


def ask_all(tag, step):
    """names, names scan, and names at_step (answered on the training thread at the next step)."""
    if not report["agent"]:
        step()
        return
    report[tag + "_names"] = summary(control("names"))
    report[tag + "_scan"] = summary(control("names", scan=True))
    got = {}
    asker = threading.Thread(target=lambda: got.update(r=control("names", at_step=True)))
    asker.start()
    time.sleep(0.3)
    step()
    asker.join(10)
    report[tag + "_at_step"] = summary(got.get("r", {"ok": False, "error": "no answer"}))


def fsdp2(losses):
    """FSDP2 on a one-process group: parameters, gradients and optimizer state are DTensors; the
    unsharded parameters are freed (storage resized to zero) after each forward and backward."""
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    mesh = init_device_mesh("cuda", (1,))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64)).to(dev)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, device=dev)

    def step():
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))

    for _ in range(3):
        step()
    report["fsdp2_param_type"] = type(next(model.parameters())).__name__
    ask_all("fsdp2", step)
    for _ in range(2):
        step()
    return model, opt


class Zoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)
        self.emb = nn.Embedding(32, 16, sparse=True)
        self.resized = nn.Parameter(torch.randn(16))

    def forward(self, idx):
        return self.lin(self.emb(idx)).sum()


def zoo(losses, m):
    dense = torch.optim.AdamW(m.lin.parameters(), lr=1e-3)
    sparse = torch.optim.SGD(m.emb.parameters(), lr=1e-2)  # sparse COO gradients
    idx = torch.randint(0, 32, (4, 8), device=dev)
    odd = dense.state.setdefault(m.lin.weight, {})

    def step():
        loss = m(idx)
        loss.backward()
        dense.step()
        sparse.step()
        dense.zero_grad(set_to_none=False)
        sparse.zero_grad()
        losses.append(round(loss.item(), 6))

    step()
    # A storage resized to zero, as FSDP leaves an unsharded parameter between uses.
    m.resized.untyped_storage().resize_(0)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(1 << 20, device=dev)
    odd["fake"] = fake
    odd["meta"] = torch.empty(4, device="meta")
    odd["csr"] = torch.randn(8, 8, device=dev).to_sparse_csr()
    odd["coo"] = torch.randn(8, 8, device=dev).to_sparse()
    try:
        odd["quantized"] = torch.quantize_per_tensor(torch.randn(8, device=dev), 0.1, 0, torch.qint8)
    except Exception:
        odd["quantized"] = torch.quantize_per_tensor(torch.randn(8), 0.1, 0, torch.qint8)
    try:
        odd["jagged"] = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(5, 4)], layout=torch.jagged, device=dev)
    except Exception as e:
        report["jagged_unavailable"] = str(e)
    try:
        from torch.testing._internal.two_tensor import TwoTensor

        odd["two"] = TwoTensor(torch.randn(4, device=dev), torch.randn(4, device=dev))
    except Exception as e:
        report["two_tensor_unavailable"] = str(e)
    odd["cpu"] = torch.randn(4)
    ask_all("zoo", step)
    step()
    return m, (dense, sparse), odd


class Odd(nn.Module):
    """A user module whose named_buffers fails once armed: the names walk itself fails."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.armed = False

    def named_buffers(self, *a, **k):
        if self.armed:
            raise RuntimeError("this module's buffers cannot be listed")
        return super().named_buffers(*a, **k)

    def forward(self, x):
        return self.lin(x).sum()


def walk_fails(losses, m):
    opt = torch.optim.SGD(m.parameters(), lr=1e-2)
    x = torch.randn(2, 8, device=dev)

    def step():
        loss = m(x)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 6))

    step()
    m.armed = True
    if report["agent"]:
        report["failing_walk"] = summary(control("names"))
        report["after_off"] = summary(control("names", at_step=True))
    for _ in range(2):
        step()  # training goes on
    return m, opt


def main():
    losses = []
    # The agent keeps the models it sees called before the first optimizer step: all of them here.
    torch.manual_seed(0)
    z = Zoo().to(dev)
    z.register_buffer("meta", torch.empty(8, device="meta"))
    z.register_buffer("pinned", torch.empty(8).pin_memory())
    odd = Odd().to(dev)
    with torch.no_grad():
        z(torch.zeros(1, 1, dtype=torch.long, device=dev))
        odd(torch.zeros(1, 8, device=dev))
    keep = [fsdp2(losses), zoo(losses, z), walk_fails(losses, odd)]
    torch.cuda.synchronize()
    report["losses"] = losses
    a = gpumem_agent.current()
    if a is not None:
        report["notes"] = dict(a.notes)
        report["failures"] = dict(a.guard.failures)
        report["phases_on"] = a.phases.on
        with open(a.manifest_path) as f:
            report["manifest_notes"] = json.load(f).get("notes")
    report["continued"] = True
    del keep
    dist.destroy_process_group()
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
