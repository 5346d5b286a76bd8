"""The header's reserved, its peak and the segment counts around an attach, with a segment made
between two chosen reads of the allocator's statistics (the race issue 25's GPU run met: a segment
made after the agent's copy of the statistics and before the hook counted was never in reserved).

The torch and hook doubles (test/agent/torch_double.py, test/support/hook_double.c) stand in for
torch and the hook: the hook double drops events while no ring is attached, as the allocator's
tracker does before the hook. The pretend allocator's statistics are torch's (flat names); a read
of them is where the allocator's lock is taken, so the segment of `--segment-after K` is made right
after the K-th read returns, from inside it, as a training thread would make it just then.

    GPUMEM_TEST_HOOK_DOUBLE=LIB PYTHONPATH=agent python3 test/agent/attach_totals.py --segment-after K
        → one JSON line: {"reads", "header": {...}, "torch": {...}}
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("--segment-after", type=int, required=True, help="the read of the statistics after which a segment is made")
args = ap.parse_args()

import torch_double  # noqa: E402

torch = torch_double.install()

from gpumem_agent import agent as agent_mod, attaching, wire  # noqa: E402

SEGMENT = 20 << 20
# The header's figures that only segment events move, and torch's names for them.
FIGURES = dict(reserved="reserved_bytes.all.current", peak_reserved="reserved_bytes.all.peak",
               n_segment_alloc="segment.all.allocated", n_segment_free="segment.all.freed")
stats = {"reserved_bytes.all.current": 0, "reserved_bytes.all.peak": 0, "segment.all.allocated": 0, "segment.all.freed": 0,
         "allocation.all.allocated": 0, "num_ooms": 0}
segments = []
reads = [0]


def segment_alloc():
    """cudaMalloc of a new segment: torch's statistics, then its tracker (the hook double)."""
    address = 0x7E0000000000 + len(segments) * SEGMENT
    segments.append(address)
    stats["segment.all.allocated"] += 1
    stats["reserved_bytes.all.current"] += SEGMENT
    stats["reserved_bytes.all.peak"] = max(stats["reserved_bytes.all.peak"], stats["reserved_bytes.all.current"])
    torch_double._hook().gpumem_double_event(wire.ACTION["segment_alloc"], 0, address, SEGMENT)


def segment_free():
    address = segments.pop()
    stats["segment.all.freed"] += 1
    stats["reserved_bytes.all.current"] -= SEGMENT
    torch_double._hook().gpumem_double_event(wire.ACTION["segment_free"], 0, address, SEGMENT)


def memory_stats(device):
    reads[0] += 1
    out = dict(stats)
    if reads[0] == args.segment_after:
        segment_alloc()  # the training, right after this read let go of the allocator's lock
    return out


torch._C._cuda_memoryStats = memory_stats
for _ in range(3):
    segment_alloc()  # before any agent: the hook double drops these, torch counts them
agent_mod.SYNC_SECONDS = 3600  # no sync loop round while this runs: every read is the start's
attaching.AttachedAgent._build = torch_double.hook_double_build
a = attaching.AttachedAgent(torch, tempfile.mkdtemp())
a.start()
start_reads = reads[0]
if a.mode == "hook" and getattr(a, "unsettled", None):
    a.settle()  # what the sync loop's next round does
segment_alloc()  # after the attach: counted by both
segment_free()
h = a.ring.totals(0)
print(json.dumps({"mode": a.mode, "reads": start_reads, "unsettled": sorted(getattr(a, "unsettled", ())),
                  "header": {k: h[k] for k in FIGURES}, "torch": {k: stats[v] for k, v in FIGURES.items()}}))
a.close()
