"""What the Python stacks as shipped would walk in real trainings, from rings recorded on a GPU.

    python3 bench/stacks_sampling.py OUT_DIR RING[.gz] ... [--capture-ns 70,300] [--rates 0,256K,512K,1M]

Per ring: each step's allocations (alloc records), those of 1 MiB or more (every one carries its
stack), the bytes below the threshold and the captures expected there at each sampling rate R
(sum of 1 - exp(-s / R): cuda/pystack.h), the step's length from the records' clock, and what the
captures would cost at the given nanoseconds a capture (bench/pystack_cost.py measures one: 65-66
ns on the CPU here; the larger figure allows for a deep model's frames out of cache). Steps are
the records' `step` field; the first (warm-up) and those cut by the ring's start are left out, the
median of the rest reported. CPU only: this reads rings, it measures nothing on a GPU.
Writes stacks_sampling.json and stacks_sampling.md into OUT_DIR.
"""
import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "agent"))

from gpumem_agent import ring as ringmod  # noqa: E402
from gpumem_agent.stacks import DEFAULT_MIN_BYTES, DEFAULT_SAMPLE_BYTES, _size  # noqa: E402
from gpumem_agent.wire import RECORD_FIELDS  # noqa: E402

F = {f: i for i, f in enumerate(RECORD_FIELDS)}
ALLOC = 0


def opened(path, tmp):
    """A Ring of `path` (a .gz copied out first)."""
    if path.endswith(".gz"):
        out = os.path.join(tmp, os.path.basename(path)[:-3])
        with gzip.open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        path = out
    return ringmod.Ring(path, create=False)


def steps_of(r):
    """{step: (sizes of its allocs, first time ns, last time ns)} from every record still in the ring."""
    per_tick = r.get("<d", "clock_ns_per_tick")
    base_ticks, base_ns = r.get("<q", "clock_base_ticks"), r.get("<q", "clock_base_ns")
    ns = (lambda t: base_ns + (t - base_ticks) * per_tick) if per_tick else (lambda t: t)
    out = {}
    for rec in r.records():
        step = rec[F["step"]]
        sizes, t0, t1 = out.get(step, ([], None, None))
        t = ns(rec[F["time"]])
        if rec[F["action"]] == ALLOC and rec[F["device"]] >= 0:
            sizes.append(rec[F["size"]])
        out[step] = (sizes, t if t0 is None else min(t0, t), t if t1 is None else max(t1, t))
    return out


def analyse(path, rates, capture_ns, tmp):
    r = opened(path, tmp)
    try:
        steps = steps_of(r)
    finally:
        r.close()
    keys = sorted(steps)[1:-1]  # the first and last: warm-up, or cut by the ring or the exit
    if not keys:
        return {"ring": os.path.basename(path), "error": "fewer than three steps in the ring"}
    rows = []
    for k in keys:
        sizes, t0, t1 = steps[k]
        big = sum(1 for s in sizes if s >= DEFAULT_MIN_BYTES)
        small = [s for s in sizes if s < DEFAULT_MIN_BYTES]
        row = {"step": k, "allocs": len(sizes), "big": big, "small_bytes": sum(small), "ms": (t1 - t0) / 1e6}
        for rate in rates:
            row["captures@%d" % rate] = big + (sum(-math.expm1(-s / rate) for s in small) if rate else 0)
        rows.append(row)
    med = {key: statistics.median(row[key] for row in rows) for key in rows[0] if key != "step"}
    out = {"ring": os.path.basename(path), "steps": len(rows), "median": med, "cost_pct": {}}
    for rate in rates:
        for c in capture_ns:
            out["cost_pct"]["%d@%g" % (rate, c)] = 100 * med["captures@%d" % rate] * c / 1e6 / med["ms"] if med["ms"] > 0 else None
    return out


def mib(n):
    """1 MiB, 512 KiB, 3.7 MiB."""
    if n and n < 2**20 and n % 1024 == 0:
        return "%d KiB" % (n // 1024)
    return ("%d MiB" % (n // 2**20)) if n % 2**20 == 0 else "%.1f MiB" % (n / 2**20)


def markdown(res):
    rates, cns = res["rates"], res["capture_ns"]
    rows = ["# The stacks as shipped, on trainings recorded on a GPU: captures a step and their share of it", "",
            "Command: `%s`. Threshold %s; sampling rate R below it (0: none). Per ring the median step (warm-up and the ring's"
            " last step left out): its allocations, those of 1 MiB or more, its bytes below the threshold, its length from the"
            " records' clock, the captures expected (every allocation at or above the threshold, Σ 1 - exp(-s/R) below), and"
            " their cost at %s ns a capture as a share of the step. An estimate from real allocation streams and the CPU's cost"
            " of a capture, not a measurement on the GPU (bench/agent_parts.py --parts null,stacks is)."
            % (res["command"], mib(DEFAULT_MIN_BYTES), " and ".join("%g" % c for c in cns)), "",
            "| ring | steps | allocs | ≥ 1 MiB | bytes below | step ms | " + " | ".join("captures R=%s" % (mib(r) if r else "0") for r in rates)
            + " | " + " | ".join("%% at R=%s, %g ns" % (mib(r) if r else "0", c) for r in rates for c in cns) + " |",
            "| --- | ---: | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in rates) + " | " + " | ".join("---:" for _ in rates for _ in cns) + " |"]
    for x in res["rings"]:
        if "error" in x:
            rows.append("| %s | %s |" % (x["ring"], x["error"]))
            continue
        m = x["median"]
        rows.append("| %s | %d | %.0f | %.0f | %s | %.2f | %s | %s |" % (
            x["ring"], x["steps"], m["allocs"], m["big"], mib(m["small_bytes"]), m["ms"],
            " | ".join("%.1f" % m["captures@%d" % r] for r in rates),
            " | ".join("%.3f%%" % x["cost_pct"]["%d@%g" % (r, c)] for r in rates for c in cns)))
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("rings", nargs="+")
    ap.add_argument("--capture-ns", default="70,300")
    ap.add_argument("--rates", default="0,256K,512K,1M")
    args = ap.parse_args()
    rates = [_size(v) for v in args.rates.split(",")]
    cns = [float(v) for v in args.capture_ns.split(",")]
    if None in rates or any(c <= 0 for c in cns):
        raise SystemExit("stacks_sampling: --rates takes sizes (0, 512K, 1M), --capture-ns positive numbers")
    if DEFAULT_SAMPLE_BYTES not in rates:
        rates.append(DEFAULT_SAMPLE_BYTES)
    res = {"command": "python3 bench/stacks_sampling.py " + " ".join(sys.argv[1:]), "rates": rates, "capture_ns": cns, "rings": []}
    with tempfile.TemporaryDirectory() as tmp:
        for p in args.rings:
            res["rings"].append(analyse(p, rates, cns, tmp))
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "stacks_sampling.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(args.out_dir, "stacks_sampling.md"), "w") as f:
        f.write(md)
    print(md, end="")


if __name__ == "__main__":
    main()
