"""A small real torch program with the agent attached, for the ring's lanes on a GPU.

    PYTHONPATH=agent GPUMEM_TUI_KEEP=1 python3 test/gpu/lanes_run.py OUT_DIR [--devices 1|2] [--events 2000]

One thread per device allocates and frees tensors of mixed sizes (about --events allocator events
a device; with two devices both lanes are written at once), while the main thread opens and
closes record_function ranges (marks on the shared lane). At the end it writes OUT_DIR/lanes-N.facts.json:
torch's own figures per device (memory_allocated, allocation counts) next to the ring's lanes, and
a compact one-lane copy of the ring (OUT_DIR/lanes-N.ring, gpumem_agent.save_ring). The live ring
stays where the agent made it (GPUMEM_TUI_KEEP=1); test/gpu/lanes-check.ts compares both with torch.
"""
import argparse
import json
import os
import random
import sys
import threading
import time

import torch

import gpumem_agent


# Tensors alive at the end, held past the agent's detach at exit (a module global outlives the atexit
# handlers): their frees come after the ring closes, so the live ring counts what torch counted here.
KEPT = {}


def churn(device, events, kept, errors):
    try:
        rnd = random.Random(device)
        live = []
        with torch.cuda.device(device):
            for _ in range(events // 2):
                n = rnd.choice([1, 7, 100, 4096, 65536, 1 << 20, 3 << 20])
                live.append(torch.empty(n, dtype=torch.uint8, device="cuda:%d" % device))
                if len(live) > 16:
                    live.pop(rnd.randrange(len(live)))
            kept[device] = live[:5]  # alive at the end: memory_allocated is not zero
            torch.cuda.synchronize(device)
    except Exception as e:  # the report says which device failed, and the others still report
        errors[device] = "%s: %s" % (type(e).__name__, e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--events", type=int, default=2000)
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.device_count() < args.devices:
        sys.exit("lanes_run: %d CUDA devices wanted, %d visible" % (args.devices, torch.cuda.device_count() if torch.cuda.is_available() else 0))
    os.makedirs(args.out_dir, exist_ok=True)
    gpumem_agent.attach()
    torch.cuda.init()
    kept, errors = KEPT, {}
    threads = [threading.Thread(target=churn, args=(d, args.events, kept, errors)) for d in range(args.devices)]
    for t in threads:
        t.start()
    marks = 0
    while any(t.is_alive() for t in threads):
        with torch.autograd.profiler.record_function("lanes.mark"):
            marks += 2
        time.sleep(0.0005)  # a few thousand marks at most: the shared lane must not lap
    for t in threads:
        t.join()
    a = gpumem_agent.current()
    name = "lanes-%d" % args.devices
    ring_path = os.path.join(args.out_dir, name + ".ring")
    compact = gpumem_agent.save_ring(ring_path)
    devices = []
    for d in range(args.devices):
        s = torch.cuda.memory_stats(d)
        devices.append({
            "device": d,
            "memory_allocated": torch.cuda.memory_allocated(d),
            "num_alloc": s.get("allocation.all.allocated", 0),
            "num_free": s.get("allocation.all.freed", 0),
            "requested_bytes": s.get("requested_bytes.all.current", 0),
            "error": errors.get(d),
        })
    facts = {
        "devices": devices,
        "mode": a.mode if a else None,
        "hook_error": a.hook_error if a else "not attached",
        "live_ring": a.ring_path if a else None,
        "n_lanes": a.ring.n_lanes if a else None,
        "lane_written": [a.ring.lane_written(lane) for lane in range(a.ring.n_lanes)] if a else None,
        "compact_ring": ring_path,
        "compact_records": compact,
        "range_marks": marks,
        "visible_devices": torch.cuda.device_count(),  # the agent makes a lane for each
        "torch": torch.__version__,
    }
    with open(os.path.join(args.out_dir, name + ".facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
