"""What one Python-stack capture costs the allocating thread (cuda/pystack.c, GPUMEM_TUI_STACKS):
bench/pystack_cost.c calls gpumem_pystack_capture() N times inside one C call, made from a Python
frame at several depths (the stack is interned after the first call: what every large allocation
from the same line pays), beside the same loop with nothing in it. Minimum over R runs, the two
interleaved. CPU only: no torch, no GPU.

    python3 bench/pystack_cost.py [OUT_DIR] [--runs 30] [--n 20000]
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA = os.path.join(HERE, "..", "cuda")


def build(out):
    cmd = ["cc", "-std=c11", "-O2", "-shared", "-fPIC", "-I", CUDA, "-I", sysconfig.get_paths()["include"],
           os.path.join(CUDA, "pystack.c"), os.path.join(HERE, "pystack_cost.c"), "-o", out, "-ldl"]
    subprocess.run(cmd, check=True)
    return cmd


def at_depth(d, fn):
    """fn() called from d Python frames deep (this function's own)."""
    return fn() if d <= 1 else at_depth(d - 1, fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "results"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args()
    lib_path = os.path.join(tempfile.mkdtemp(), "pystack_cost.so")
    cmd = build(lib_path)
    lib = ctypes.CDLL(lib_path)  # the GIL released, as PyTorch's ops run
    lib.gpumem_pystack_enable.argtypes = [ctypes.c_uint64]
    lib.gpumem_bench_capture.restype = ctypes.c_double
    lib.gpumem_bench_capture.argtypes = [ctypes.c_int, ctypes.c_int]
    assert lib.gpumem_pystack_enable(1) == 0, "this interpreter's frames are not known to pystack.c"
    rows = []
    for depth in (4, 16, 64):
        cap, empty = [], []
        for _ in range(args.runs):
            cap.append(at_depth(depth, lambda: lib.gpumem_bench_capture(args.n, 0)))
            empty.append(at_depth(depth, lambda: lib.gpumem_bench_capture(args.n, 1)))
        rows.append({"depth": depth, "capture_ns": round(min(cap), 1), "empty_ns": round(min(empty), 1), "added_ns": round(min(cap) - min(empty), 1)})
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
              "machine": "%s, %d cores" % (platform.machine(), os.cpu_count()), "runs": args.runs, "n": args.n,
              "command": "%s bench/pystack_cost.py %s --runs %d --n %d" % (os.path.basename(sys.executable), args.out, args.runs, args.n), "build": " ".join(cmd), "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pystack_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# One Python-stack capture (cuda/pystack.c), on the allocating thread", "",
          "Command: `%s` (%s, Python %s, %s). `gpumem_pystack_capture()` called %d times inside one C call made from a Python "
          "frame at each depth, the GIL released (ctypes.CDLL, as PyTorch's ops run); the stack is interned after the first "
          "call, as it is for every large allocation after the first from the same line. Beside it the same loop with nothing "
          "in it; minimum over %d runs each, interleaved." % (result["command"], result["date"], result["python"], result["machine"], args.n, args.runs),
          "", "| Python frames below the call | capture ns | empty loop ns | **added ns** |", "| ---: | ---: | ---: | ---: |"]
    md += ["| %d | %.1f | %.1f | **%.1f** |" % (r["depth"], r["capture_ns"], r["empty_ns"], r["added_ns"]) for r in rows]
    md += ["", "Frames kept: the innermost 16 (the walk looks at 256 at most). Only allocations at or above GPUMEM_TUI_STACKS pay this; "
           "below it the hook's added work is one relaxed load and a compare (bench/hook_cost.py, on a GPU)."]
    with open(os.path.join(args.out, "pystack_cost.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
