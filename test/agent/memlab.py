"""pytorch_memlab's API from gpumem_agent, on a real GPU: python3 test/agent/memlab.py SCENARIO.
Prints one JSON report; test/agent/gpu.test.ts checks it. Scenarios: lines, report, courtesy, magics."""
import io
import json
import os
import sys

import torch

import gpumem_agent

gpumem_agent.attach()
dev = torch.device("cuda:0")
MiB = 1 << 20


@gpumem_agent.profile
def known(n):
    a = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)  # KNOWN-A: 3 MiB
    b = torch.empty(MiB, dtype=torch.uint8, device=dev)  # KNOWN-B: 1 MiB
    del a  # KNOWN-C: frees 3 MiB
    c = [torch.empty(1000, dtype=torch.uint8, device=dev) for _ in range(n)]  # KNOWN-D: n blocks of 1024 B
    return b, c


def line_of(tag):
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if "# " + tag in text and "def line_of" not in text and "line_of(" not in text:
                return i
    raise KeyError(tag)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).to(dev)


def trained():
    """The model after one AdamW step: parameters, gradients and optimizer state all live."""
    m = model()
    opt = torch.optim.AdamW(m.parameters())
    m(torch.randn(64, 512, device=dev)).sum().backward()
    opt.step()
    return m, opt


def main():
    scenario = sys.argv[1]
    torch.zeros(1, device=dev)
    out = {"scenario": scenario, "mode": gpumem_agent.current().mode}
    if scenario == "lines":
        keep = [known(5), known(5)]
        stats = {f["function"]: f for f in gpumem_agent.profile_stats()}
        f = stats["known"]
        by_line = {l["line"]: l for l in f["lines"]}
        out["calls"] = f["calls"]
        out["lost"] = f["lost_records"]
        out["lines"] = {tag: by_line.get(line_of(tag)) for tag in ("KNOWN-A", "KNOWN-B", "KNOWN-C", "KNOWN-D")}
        out["manifest_lines"] = gpumem_agent.current().manifest()["lines"]
        buf = io.StringIO()
        gpumem_agent.print_profile(buf)
        out["table"] = buf.getvalue()
        del keep
    elif scenario == "report":
        m, opt = trained()
        view = m[0].weight[:10]  # a view: its storage is the weight's, counted once
        buf = io.StringIO()
        rows = gpumem_agent.report(m, file=buf)
        out["rows"] = [{k: r[k] for k in ("name", "category", "size")} for r in rows]
        out["text"] = buf.getvalue()
        out["param_bytes"] = sum(p.untyped_storage().nbytes() for p in m.parameters())
        out["memory_allocated"] = torch.cuda.memory_allocated(dev)
        del view
    elif scenario == "courtesy":
        m, opt = trained()
        before = {"allocated": torch.cuda.memory_allocated(dev), "reserved": torch.cuda.memory_reserved(dev),
                  # what must move: parameters, their gradients, AdamW's state (cuBLAS workspaces
                  # also live in the allocator, but no Python tensor holds them: they stay)
                  "training_bytes": sum(p.untyped_storage().nbytes() + p.grad.untyped_storage().nbytes() for p in m.parameters())
                  + sum(v.untyped_storage().nbytes() for st in opt.state.values() for v in st.values() if torch.is_tensor(v) and v.is_cuda)}
        checksum = sum(float(p.double().sum()) for p in m.parameters())
        with gpumem_agent.courtesy() as c:
            during = {"allocated": torch.cuda.memory_allocated(dev), "reserved": torch.cuda.memory_reserved(dev),
                      "params_on": str(next(m.parameters()).device), "moved_bytes": c.moved_bytes, "released_bytes": c.released_bytes}
        after = {"allocated": torch.cuda.memory_allocated(dev), "params_on": str(next(m.parameters()).device),
                 "checksum_equal": abs(sum(float(p.double().sum()) for p in m.parameters()) - checksum) < 1e-6,
                 "same_parameter_objects": all(p is q for p, q in zip(opt.param_groups[0]["params"], m.parameters()))}
        m(torch.randn(64, 512, device=dev)).sum().backward()  # training goes on
        opt.step()
        out.update(before=before, during=during, after=after)
    elif scenario == "magics":
        try:
            from IPython.core.interactiveshell import InteractiveShell
        except ImportError:
            out["skipped"] = "IPython is not installed"
            print(json.dumps(out))
            return
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "gpumem_agent")
        ip.user_ns["torch"] = torch
        buf = io.StringIO()
        old, sys.stdout = sys.stdout, buf
        try:
            ip.run_cell_magic("gpumem", "", "x = torch.empty(2 * 1024 * 1024, dtype=torch.uint8, device='cuda')\ny = x + 1\n")
        finally:
            sys.stdout = old
        out["table"] = buf.getvalue()
        out["x_in_namespace"] = "x" in ip.user_ns
    print(json.dumps(out))


main()
