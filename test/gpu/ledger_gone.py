"""GPU memory left to a process that no longer exists, for the GPU ledger's `gone` row
(bench/gpu-parts/ledger-screens.sh). Run from the repository root on a GPU machine:

    python3 test/gpu/ledger_gone.py --ready FILE [--bytes N] [--seconds S]

The process started (the launcher) forks the owner and exits at once, so the owner's parent is
init (or the nearest subreaper), which reaps it when it exits. The owner makes a CUDA context and
holds --bytes through torch, reads NVML's list of processes on its GPU, then forks a keeper: the
keeper never touches CUDA (torch forbids it after fork); it only keeps the /dev/nvidia* file
descriptors it inherited open, and sleeps --seconds. The owner writes --ready (JSON: owner and
keeper pids, the bytes, NVML's list as the owner saw it) and leaves with os._exit(0), running no
CUDA teardown. The driver frees a context when the last descriptor of it closes: while the keeper
sleeps the memory may stay held, and NVML may go on listing the owner's pid, which no process
has any more. What NVML does list then is the caller's to read (the script records it); nothing
here assumes it.

Exit status: 0 (the launcher); 2 where torch, pynvml or a CUDA device is missing (the owner says
so in --ready's "error")."""
import argparse
import json
import os
import signal
import sys
import time


def nvml_lists(pynvml):
    """NVML's compute processes on each of its devices: {index: [[pid, used bytes], ...]}."""
    out = {}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        out[str(i)] = [[int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)] for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
    return out


def write_ready(path, facts):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(facts, f)
    os.rename(tmp, path)


def owner(a):
    # Bounded on its own: out of the launcher's process group, no caller's timeout reaches it (the
    # keeper, a fork, has no alarm pending: its loop ends by itself).
    signal.alarm(int(a.seconds) + 30)
    try:
        import pynvml
        import torch
    except ImportError as e:
        write_ready(a.ready, {"error": "not installed: %s" % e})
        os._exit(2)
    if not torch.cuda.is_available():
        write_ready(a.ready, {"error": "torch %s sees no CUDA device" % torch.__version__})
        os._exit(2)
    x = torch.empty(a.bytes, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    pynvml.nvmlInit()
    before = nvml_lists(pynvml)
    sys.stdout.flush()
    keeper = os.fork()
    if keeper == 0:
        # The keeper: the inherited descriptors stay open while it sleeps; no CUDA, no NVML.
        end = time.time() + a.seconds
        while time.time() < end:
            time.sleep(0.2)
        os._exit(0)
    write_ready(a.ready, {"owner": os.getpid(), "keeper": keeper, "bytes": a.bytes,
                          "reserved_bytes": torch.cuda.memory_reserved(), "nvml_before": before, "error": None})
    print("ledger_gone: owner %d holds %d bytes, keeper %d; NVML listed %s; the owner leaves now" % (
        os.getpid(), a.bytes, keeper, before), flush=True)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ready", required=True)
    ap.add_argument("--bytes", type=int, default=512 << 20)
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    if os.fork() == 0:
        os.setsid()  # out of the launcher's session and process group: the owner's parent is init
        owner(a)
    os._exit(0)


if __name__ == "__main__":
    main()
