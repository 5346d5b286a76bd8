"""What the hook's Python stacks cost the allocating thread (cuda/pystack.c, GPUMEM_TUI_STACKS):
bench/pystack_cost.c calls gpumem_pystack_capture() N times inside one C call, made from a Python
frame at several depths (the stack is interned after the first call: what every sampled allocation
from the same line pays), beside the same loop with nothing in it; and where the user's frame lies
below many library frames (a model in an installed package: the walk goes past the innermost 16 to
find it). Then a stream of allocations of mixed sizes as the hook sees it, stacks off, and on at the
default threshold with several sampling rates: ns per allocation and the share that carried a stack.
Minimum over R runs, interleaved. CPU only: no torch, no GPU.

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


# The same recursion in a file of an installed package's path: library code to the walker's rule.
_LIB = {}
exec(compile("def lib_depth(d, fn):\n    return fn() if d <= 1 else lib_depth(d - 1, fn)\n",
             "/usr/lib/python3/dist-packages/pystack_cost_model.py", "exec"), _LIB)


def under_library(d, fn):
    """fn() called from d library frames deep, below this file's frames (the user's)."""
    return _LIB["lib_depth"](d, fn)


# A model's call chain: 48 distinct functions in an installed package's file (each its own code
# object, as a transformers model's forward, _call_impl and _wrapped_call_impl are), so that each
# frame's kind is its own entry in the walker's table.
_CHAIN = {}
exec(compile("".join("def f%d(fn):\n    return f%d(fn)\n" % (i, i + 1) for i in range(47)) + "def f47(fn):\n    return fn()\n",
             "/usr/lib/python3/dist-packages/pystack_cost_chain.py", "exec"), _CHAIN)


def under_chain(d, fn):
    """fn() called below the 48 distinct library functions (d is 48: the row's label)."""
    return _CHAIN["f0"](fn)


def stream_sizes(n, seed=1):
    """n allocation sizes, log-uniform from 512 B to 4 MiB, rounded to 512 B as the allocator does."""
    import random

    rng = random.Random(seed)
    return [max(512, int(2 ** rng.uniform(9, 22)) // 512 * 512) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(HERE, "results"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args()
    lib_path = os.path.join(tempfile.mkdtemp(), "pystack_cost.so")
    cmd = build(lib_path)
    lib = ctypes.CDLL(lib_path)  # the GIL released, as PyTorch's ops run
    lib.gpumem_pystack_enable.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.gpumem_bench_capture.restype = ctypes.c_double
    lib.gpumem_bench_capture.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.gpumem_bench_stream.restype = ctypes.c_double
    lib.gpumem_bench_stream.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
    assert lib.gpumem_pystack_enable(1, 0) == 0, "this interpreter's frames are not known to pystack.c"
    rows = []
    for label, depth, call in [("user frames", 4, at_depth), ("user frames", 16, at_depth), ("user frames", 64, at_depth),
                               ("library frames below the user's", 30, under_library), ("library frames below the user's", 120, under_library),
                               ("distinct library functions below the user's", 48, under_chain)]:
        cap, empty = [], []
        for _ in range(args.runs):
            cap.append(call(depth, lambda: lib.gpumem_bench_capture(args.n, 0)))
            empty.append(call(depth, lambda: lib.gpumem_bench_capture(args.n, 1)))
        rows.append({"frames": label, "depth": depth, "capture_ns": round(min(cap), 1), "empty_ns": round(min(empty), 1), "added_ns": round(min(cap) - min(empty), 1)})
    sys.path.insert(0, os.path.join(HERE, "..", "agent"))
    from gpumem_agent.stacks import DEFAULT_MIN_BYTES

    sizes = stream_sizes(4096)
    arr = (ctypes.c_uint64 * len(sizes))(*sizes)
    below = sum(s for s in sizes if s < DEFAULT_MIN_BYTES)
    stream = []
    for rate in (0, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20, None):  # None: stacks off
        lib.gpumem_pystack_enable(0 if rate is None else DEFAULT_MIN_BYTES, rate or 0)
        best, taken = float("inf"), ctypes.c_uint64()
        for _ in range(args.runs):
            best = min(best, at_depth(16, lambda: lib.gpumem_bench_stream(args.n, arr, len(sizes), ctypes.byref(taken))))
        stream.append({"sample_bytes": rate, "ns_per_alloc": round(best, 1), "taken_share": round(taken.value / args.n, 4)})
    off = next(r["ns_per_alloc"] for r in stream if r["sample_bytes"] is None)
    for r in stream:
        r["added_ns"] = round(r["ns_per_alloc"] - off, 1)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
              "machine": "%s, %d cores" % (platform.machine(), os.cpu_count()), "runs": args.runs, "n": args.n,
              "command": "%s bench/pystack_cost.py %s --runs %d --n %d" % (os.path.basename(sys.executable), args.out, args.runs, args.n), "build": " ".join(cmd), "rows": rows,
              "stream": {"sizes": "4096 sizes log-uniform in 512 B .. 4 MiB (cycled), %.0f%% of the bytes below the threshold" % (100 * below / sum(sizes)),
                         "min_bytes": DEFAULT_MIN_BYTES, "rows": stream}}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pystack_cost.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# One Python-stack capture (cuda/pystack.c), on the allocating thread", "",
          "Command: `%s` (%s, Python %s, %s). `gpumem_pystack_capture()` called %d times inside one C call made from a Python "
          "frame at each depth, the GIL released (ctypes.CDLL, as PyTorch's ops run); the stack is interned after the first "
          "call, as it is for every large allocation after the first from the same line. Beside it the same loop with nothing "
          "in it; minimum over %d runs each, interleaved." % (result["command"], result["date"], result["python"], result["machine"], args.n, args.runs),
          "", "| Python frames below the call | depth | capture ns | empty loop ns | **added ns** |", "| --- | ---: | ---: | ---: | ---: |"]
    md += ["| %s | %d | %.1f | %.1f | **%.1f** |" % (r["frames"], r["depth"], r["capture_ns"], r["empty_ns"], r["added_ns"]) for r in rows]
    md += ["", "Frames kept: the innermost 16, and where the user's frame lies deeper (library frames below it), the innermost 11, "
           "a frame standing for those left out, the user's and 3 of its callers; the walk looks at 256 frames at most.",
           "", "## A stream of allocations as the hook sees them", "",
           "%s; threshold %d bytes; ns per allocation (the check, and a capture where one is taken), minimum over %d runs of %d "
           "allocations, from 16 frames deep. sample bytes = the mean bytes between samples below the threshold (0: none below it; "
           "off: stacks off, the hook's compare alone)." % (result["stream"]["sizes"], DEFAULT_MIN_BYTES, args.runs, args.n),
           "", "| sample bytes | ns per allocation | added over off | share with a stack |", "| ---: | ---: | ---: | ---: |"]
    md += ["| %s | %.1f | %+.1f | %.2f%% |" % ("off" if r["sample_bytes"] is None else r["sample_bytes"], r["ns_per_alloc"], r["added_ns"], 100 * r["taken_share"])
           for r in stream]
    with open(os.path.join(args.out, "pystack_cost.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
