"""Holds GPU memory for the GPU ledger's screens (bench/gpu-parts/ledger-screens.sh): allocates
--bytes through torch, then writes --ready (JSON: its pid, torch's reserved, NVML's used of its own
process where pynvml reads it) and sleeps until --seconds pass or its stdin closes. Run by another
user, or watched from another pid namespace, it is what the GPU ledger's other_users and gone rows
are made of."""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--bytes", type=int, default=1 << 30)
ap.add_argument("--ready", required=True)
ap.add_argument("--seconds", type=float, default=60.0)
a = ap.parse_args()

import torch  # noqa: E402

x = torch.empty(a.bytes, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
used = None
try:
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
        if p.pid == os.getpid():
            used = p.usedGpuMemory
except Exception as e:  # the figure is a cross-check only
    print("ledger_hold: pynvml: %s" % e, file=sys.stderr)
tmp = a.ready + ".tmp"
with open(tmp, "w") as f:
    json.dump({"pid": os.getpid(), "uid": os.getuid(), "reserved_bytes": torch.cuda.memory_reserved(), "nvml_used_bytes": used, "bytes": a.bytes}, f)
os.rename(tmp, a.ready)
print("ledger_hold: pid %d holds %d bytes (reserved %d, NVML %s)" % (os.getpid(), a.bytes, torch.cuda.memory_reserved(), used), flush=True)
end = time.time() + a.seconds
while time.time() < end:
    time.sleep(0.2)
del x
