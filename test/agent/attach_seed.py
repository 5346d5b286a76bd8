"""An attach's seed made from a real recording, by the agent's own code (gpumem_agent.seed):
test/fixtures/normal-history.ring (every record of a 3-step training, from CUDA's start) and
normal-history.pickle (torch's _snapshot() of the same run, taken at the ring's last record).

The attach is pretended at record A: the hook's lane holds records [A, end) only. A snapshot at
record P is the real one taken back over records [P, end) (an alloc undone frees its address, a
free undone gives the block back at its rounded size, a segment_alloc undone removes the segment).
The seed is then made as the agent makes it: seed_device finds where the snapshot lies among the
records written "during" it (window [P - before, P + after)) and ties it to a count of events.

    python3 test/agent/attach_seed.py A P [--before N] [--after N]   → the seed (JSON) on stdout
"""
import argparse
import json
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))

from gpumem_agent import ring  # noqa: E402
from gpumem_agent.seed import (ALLOC, F_ACTION, F_ADDRESS, F_SIZE, FREE_REQUESTED, SEGMENT_ALLOC, seed_device, seed_stacks)  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "fixtures")


def block_size(requested):
    return 512 if requested <= 512 else (requested + 511) // 512 * 512


def recording():
    r = ring.Ring(os.path.join(FIXTURES, "normal-history.ring"), create=False)
    try:
        records = r.records()
    finally:
        r.close()
    with open(os.path.join(FIXTURES, "normal-history.pickle"), "rb") as f:
        snap = pickle.load(f)
    return records, snap["segments"]


def snapshot_at(records, segments, p):
    """The allocator's segments right before record p: the final snapshot taken back."""
    segs = {s["address"]: dict(s, blocks=[dict(b) for b in s["blocks"] if b["state"] == "active_allocated"]) for s in segments}
    end = len(records) - 1  # the last record is the snapshot mark
    requested = {}
    for r in records[:end]:
        if r[F_ACTION] == ALLOC:
            requested[r[F_ADDRESS]] = r[F_SIZE]

    def containing(address):
        for s in segs.values():
            if s["address"] <= address < s["address"] + s["total_size"]:
                return s
        raise AssertionError("no segment holds %#x" % address)

    for r in reversed(records[p:end]):
        a, address = r[F_ACTION], r[F_ADDRESS]
        if a == ALLOC:
            s = containing(address)
            s["blocks"] = [b for b in s["blocks"] if b["address"] != address]
        elif a == FREE_REQUESTED:
            containing(address)["blocks"].append({"address": address, "size": block_size(r[F_SIZE]), "requested_size": r[F_SIZE], "state": "active_allocated"})
        elif a == SEGMENT_ALLOC:
            assert not segs[address]["blocks"], "a segment undone with blocks in it"
            del segs[address]
    for s in segs.values():
        s["blocks"].sort(key=lambda b: b["address"])
    return [segs[a] for a in sorted(segs)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("attach", type=int)
    ap.add_argument("at", type=int)
    ap.add_argument("--before", type=int, default=20)
    ap.add_argument("--after", type=int, default=20)
    args = ap.parse_args()
    records, segments = recording()
    lane = records[args.attach:]  # what the hook wrote from its attach on (seq as in the recording)
    p = args.at - args.attach
    wb, wa = max(0, p - args.before), min(len(lane) - 1, p + args.after)
    stacks = {}
    seed = seed_device(0, lane[:wa], wb, wa, snapshot_at(records, segments, args.at), stacks)
    json.dump({"version": 1, "unix_ns": 0, "devices": [seed], "stacks": seed_stacks(stacks)}, sys.stdout)


if __name__ == "__main__":
    main()
