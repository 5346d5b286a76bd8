"""Real training runs on a GPU with the agent attached, each ending in a JSON report on stdout.

    PYTHONPATH=agent python3 test/agent/scenarios.py SCENARIO [--save DIR] [--steps N]

Scenarios: normal, no-zero-grad, kept-loss-graph, oom, names, commands, idle.
The agent is attached the way `gpumem-tui run` does it (GPUMEM_TUI_INJECT=1: through the
sitecustomize on PYTHONPATH) or explicitly. The report holds what torch itself says, next to what
the ring's header says, so the tests compare the two. `--save DIR` keeps a compact copy of the
ring (DIR/SCENARIO.ring, .json manifest, .facts.json) as a test fixture; `--snapshot FILE` also
records PyTorch's memory history over the run and dumps it (torch.cuda.memory._dump_snapshot).
"""
import argparse
import json
import time
import threading
import os
import socket
import struct
import sys

import torch

if os.environ.get("GPUMEM_TUI_INJECT") != "1":
    import gpumem_agent

    gpumem_agent.attach()
import gpumem_agent  # noqa: E402
from gpumem_agent import wire  # noqa: E402

dev = torch.device("cuda:0")


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        with torch.profiler.record_function("mlp_block"):
            return x + self.mlp(self.norm(x))


def model(d=256, layers=2):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block(d) for _ in range(layers)], torch.nn.Linear(d, 10)).to(dev)


def batch(n=16, t=64, d=256):
    return torch.randn(n, t, d, device=dev), torch.randint(0, 10, (n, t), device=dev)


STEP_ALLOCATED = []


def train(steps, zero_grad=True, keep_graph=False):
    m = model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    kept = []
    running = 0
    STEP_ALLOCATED.clear()
    for _ in range(steps):
        x, y = batch()
        with torch.profiler.record_function("train_step"):
            out = m(x)
            loss = lossf(out.reshape(-1, 10), y.reshape(-1))
            loss.backward()
            opt.step()
            # torch's figure at the step boundary, where the hook writes its sync record
            STEP_ALLOCATED.append(torch.cuda.memory_allocated())
            if zero_grad:
                opt.zero_grad(set_to_none=True)
        if keep_graph:
            # the classic running validation loss outside no_grad: `running += loss` keeps every
            # step's graph, and with it that forward's saved activations
            vx, vy = batch()
            running = running + lossf(m(vx).reshape(-1, 10), vy.reshape(-1))
    kept.append(running)
    torch.cuda.synchronize()
    return m, opt, kept


def control(cmd, **args):
    a = gpumem_agent.current()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(a.sock_path)
    s.sendall((json.dumps(dict(id=1, cmd=cmd, **args)) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def header_report():
    a = gpumem_agent.current()
    r = a.ring
    recs = r.records()
    by_phase = {}
    by_range = {}
    for rec in recs:
        action, phase, rng, size = rec[8], rec[10], rec[7], rec[3]
        if action == wire.ACTION["alloc"]:
            by_phase[wire.PHASE_NAMES[phase]] = by_phase.get(wire.PHASE_NAMES[phase], 0) + size
            by_range[str(rng)] = by_range.get(str(rng), 0) + size
    return {
        "mode": a.mode,
        "hook_error": a.hook_error,
        "totals": r.totals(0),
        "write_index": r.written(),
        "cur_step": r.get("<I", "cur_step"),
        "records": len(recs),
        "alloc_bytes_by_phase": by_phase,
        "alloc_bytes_by_range": by_range,
        "ranges": a.ranges(),
        "oom_records": [dict(size=x[3], free=x[5]) for x in recs if x[8] == wire.ACTION["oom"]],
        "syncs": [dict(device=x[9], step=x[6], allocated=x[2], reserved=x[3], requested=x[4], events=x[5])
                  for x in recs if x[8] == wire.ACTION["sync"]],
        "step_allocated": list(STEP_ALLOCATED),
        "actions": sorted({x[8] for x in recs}),
    }


def torch_report():
    return {
        "memory_allocated": torch.cuda.memory_allocated(dev),
        "memory_reserved": torch.cuda.memory_reserved(dev),
        "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
        "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
        "active": torch.cuda.memory_stats(dev).get("active_bytes.all.current", 0),
        "num_alloc_retries": torch.cuda.memory_stats(dev).get("num_alloc_retries", 0),
        "num_ooms": torch.cuda.memory_stats(dev).get("num_ooms", 0),
        "requested_bytes": torch.cuda.memory_stats(dev).get("requested_bytes.all.current", 0),
        "allocation_count": torch.cuda.memory_stats(dev).get("allocation.all.allocated", 0),
        "free_count": torch.cuda.memory_stats(dev).get("allocation.all.freed", 0),
        "segment_alloc_count": torch.cuda.memory_stats(dev).get("segment.all.allocated", 0),
        "segment_free_count": torch.cuda.memory_stats(dev).get("segment.all.freed", 0),
        "torch_version": torch.__version__,
        "expandable_segments": "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--save")
    ap.add_argument("--snapshot", help="record memory history (Python stacks) and dump a snapshot pickle here at the end")
    args = ap.parse_args()
    torch.zeros(1, device=dev)  # CUDA up: the agent starts here
    if args.snapshot:
        torch.cuda.memory._record_memory_history(context="all", stacks="python", max_entries=100000)
    report = {"scenario": args.scenario, "pid": os.getpid()}
    keep = []
    if args.scenario == "normal":
        keep.append(train(args.steps))
    elif args.scenario == "no-zero-grad":
        keep.append(train(args.steps, zero_grad=False))
    elif args.scenario == "kept-loss-graph":
        keep.append(train(args.steps, keep_graph=True))
    elif args.scenario == "oom":
        keep.append(train(2))
        try:
            torch.empty(1 << 44, dtype=torch.uint8, device=dev)  # 16 TiB
            report["oom_raised"] = False
        except torch.OutOfMemoryError:
            report["oom_raised"] = True
        report["oom_snapshot"] = gpumem_agent.current().oom_snapshot
    elif args.scenario == "names":
        m, opt, _ = train(2)
        x, y = batch()
        torch.nn.CrossEntropyLoss()(m(x).reshape(-1, 10), y.reshape(-1)).backward()  # gradients live
        keep.append((m, opt))
        report["names"] = control("names")
        report["scan"] = control("names", scan=True)
        # at_step: asked from another thread, answered right after the next optimizer step, on the
        # training thread, where this step's gradients are alive (zero_grad below frees them)
        got = {}
        asker = threading.Thread(target=lambda: got.update(reply=control("names", at_step=True)))
        asker.start()
        time.sleep(0.5)
        opt.step()
        opt.zero_grad(set_to_none=True)
        asker.join(10)
        report["names_at_step"] = got.get("reply")
        report["names_bad_at_step"] = control("names", at_step="yes")
    elif args.scenario == "commands":
        m, opt, _ = train(2)
        junk = [torch.empty(64 << 20, dtype=torch.uint8, device=dev) for _ in range(4)]
        del junk
        report["info"] = control("info")
        report["empty_cache"] = control("empty_cache")
        report["history"] = control("history", enabled=True)
        train(1)
        report["dump"] = control("dump_snapshot")
        import tempfile

        report["dump_at"] = control("dump_snapshot", path=os.path.join(tempfile.mkdtemp(), "monitor-named.pickle"))
        report["dump_at_exists"] = bool(report["dump_at"].get("ok")) and os.path.exists(report["dump_at"]["path"])
        report["dump_bad_path"] = control("dump_snapshot", path="relative.pickle")
        report["reset_peaks"] = control("reset_peaks")
        report["bad_verb"] = control("frobnicate")
        report["bad_args"] = control("history", enabled="yes")
        if report["dump"].get("ok"):
            import pickle

            from torch.cuda import _memory_viz

            with open(report["dump"]["path"], "rb") as f:
                snap = pickle.load(f)
            html = _memory_viz.trace_plot(snap)
            report["dump_loaded"] = {"segments": len(snap["segments"]), "traces": sum(len(t) for t in snap["device_traces"]), "html_bytes": len(html)}
        keep.append((m, opt))
    elif args.scenario == "idle":
        pass
    if args.snapshot:
        torch.cuda.memory._dump_snapshot(args.snapshot)
        torch.cuda.memory._record_memory_history(None)
        report["snapshot_bytes"] = os.path.getsize(args.snapshot)
    a = gpumem_agent.current()
    a.sync()
    report["header"] = header_report()
    report["torch"] = torch_report()
    report["manifest"] = a.manifest()
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        path = os.path.join(args.save, args.scenario + ".ring")
        report["saved_records"] = gpumem_agent.save_ring(path)
        facts = dict(report["torch"], steps=report["header"]["cur_step"], records=report["saved_records"], scenario=args.scenario)
        with open(os.path.join(args.save, args.scenario + ".facts.json"), "w") as f:
            json.dump(facts, f, indent=1)
    print(json.dumps(report))


main()
