"""What the agent costs a training process, side by side with PyTorch's own memory recording.

    python3 bench/agent_overhead.py [OUT_DIR] [--reps N] [--cpus 2,3]

Modes, each in a fresh process (a recorder cannot be fully removed once attached), interleaved
across repetitions so that drift in the machine hits every mode alike:
  none          no monitoring
  tracker-empty the agent with a trace tracker that returns at once: what PyTorch itself spends to
                call any allocator trace tracker (the floor for this design)
  agent         gpumem_agent.attach(): the allocator hook, phase hooks, sync thread
  history-state torch.cuda.memory._record_memory_history(enabled="state")
  history-all   torch.cuda.memory._record_memory_history()  (the default: all, with stacks)
  torch-profiler torch.profiler.profile(profile_memory=True) open over both workloads
Workloads, in the same process:
  loop     torch.empty(4096 bytes) / del: ns per iteration (3 allocator events each)
  step     a small, CPU-bound transformer's training step (forward, backward, AdamW): ms per step
  gpu_step a convnet's training step on 64 images of 224×224 (bound by the GPU): ms per step
Medians over repetitions; overhead relative to `none`.
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ["none", "tracker-empty", "agent", "history-state", "history-all", "torch-profiler"]

CHILD = r"""
import os, sys, time, json, statistics
mode, cpus = sys.argv[1], sys.argv[2]
# Every mode on the same cores: unpinned, a process's placement alone moved this loop by 2x.
os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
import torch
dev = torch.device("cuda:0")
torch.zeros(1, device=dev)
if mode == "tracker-empty":
    os.environ["GPUMEM_TUI_HOOK"] = "empty"
if mode in ("agent", "tracker-empty"):
    import gpumem_agent
    a = gpumem_agent.attach()
    assert a.mode == "hook", a.hook_error
elif mode == "history-state":
    torch.cuda.memory._record_memory_history(enabled="state")
elif mode == "history-all":
    torch.cuda.memory._record_memory_history()
elif mode == "torch-profiler":
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    prof = torch.profiler.profile(activities=acts, profile_memory=True)
    prof.__enter__()

def loop(n):
    for _ in range(n):
        x = torch.empty(4096, dtype=torch.uint8, device=dev)
        del x

loop(20000)
chunks = []
for _ in range(9):  # the median of 9 chunks of 20,000: a hiccup in one does not move the result
    t = time.perf_counter_ns(); loop(20000); chunks.append((time.perf_counter_ns() - t) / 20000)
loop_ns = statistics.median(chunks)

torch.manual_seed(0)
layer = lambda: torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
m = torch.nn.Sequential(*[layer() for _ in range(4)], torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randn(8, 32, 128, device=dev); y = torch.randint(0, 10, (8 * 32,), device=dev)
def step():
    out = m(x).reshape(-1, 10)
    torch.nn.functional.cross_entropy(out, y).backward()
    opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(10): step()
torch.cuda.synchronize()
times = []
for _ in range(7):
    t = time.perf_counter(); [step() for _ in range(15)]; torch.cuda.synchronize(); times.append((time.perf_counter() - t) / 15 * 1000)
step_ms = statistics.median(times)

# Bound by the GPU: what the host adds should vanish behind the kernels.
torch.manual_seed(0)
def block(i, o): return [torch.nn.Conv2d(i, o, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(o), torch.nn.ReLU()]
cnn = torch.nn.Sequential(*block(3, 64), *block(64, 128), *block(128, 256), *block(256, 512), *block(512, 512),
                          torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(512, 10)).to(dev)
copt = torch.optim.SGD(cnn.parameters(), lr=0.01, momentum=0.9)
img = torch.randn(64, 3, 224, 224, device=dev); lab = torch.randint(0, 10, (64,), device=dev)
def gstep():
    torch.nn.functional.cross_entropy(cnn(img), lab).backward()
    copt.step(); copt.zero_grad(set_to_none=True)
for _ in range(5): gstep()
torch.cuda.synchronize()
gtimes = []
for _ in range(5):
    t = time.perf_counter(); [gstep() for _ in range(5)]; torch.cuda.synchronize(); gtimes.append((time.perf_counter() - t) / 5 * 1000)
print(json.dumps({"mode": mode, "loop_ns": loop_ns, "step_ms": step_ms, "gpu_step_ms": statistics.median(gtimes)}))
if mode == "torch-profiler":
    prof.__exit__(None, None, None)
"""


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else os.path.join(HERE, "results")
    if "--render" in sys.argv:  # tables again from a run's JSON (no GPU needed)
        with open(sys.argv[sys.argv.index("--render") + 1]) as f:
            r = json.load(f)
        write(out_dir, r["runs"], r["reps"], r["cpus"], meta=r)
        return
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    cpus = sys.argv[sys.argv.index("--cpus") + 1] if "--cpus" in sys.argv else "2,3"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "agent") + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    env.setdefault("GPUMEM_TUI_DIR", "/tmp/gpumem-bench-agents")
    runs = {m: [] for m in MODES}
    for rep in range(reps):
        order = MODES[rep % len(MODES):] + MODES[: rep % len(MODES)]  # rotate who goes first
        for mode in order:
            p = subprocess.run([sys.executable, "-c", CHILD, mode, cpus], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit("mode %s failed:\n%s" % (mode, p.stderr[-2000:]))
            runs[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
        write(out_dir, runs, rep + 1, cpus)  # after every repetition: a cut-short run still leaves results


def modes_in(runs):
    """The modes a run has (an older run's JSON lacks the newer ones)."""
    return [m for m in MODES if runs.get(m)]


def summary(runs, pick):
    """Per mode: loop ns, step ms, GPU-bound step ms, and each against `none`, with `pick` (median or min) over reps."""
    out = {}
    for m in modes_in(runs):
        out[m] = {"loop_ns": pick([r["loop_ns"] for r in runs[m]]), "step_ms": pick([r["step_ms"] for r in runs[m]])}
        g = [r["gpu_step_ms"] for r in runs[m] if "gpu_step_ms" in r]
        out[m]["gpu_step_ms"] = pick(g) if g else None
    base = out["none"]
    for m in out:
        out[m]["loop_overhead_pct"] = round(100 * (out[m]["loop_ns"] / base["loop_ns"] - 1), 2)
        out[m]["step_overhead_pct"] = round(100 * (out[m]["step_ms"] / base["step_ms"] - 1), 2)
        out[m]["loop_ns_added_per_event"] = round((out[m]["loop_ns"] - base["loop_ns"]) / 3, 1)
        gb = base["gpu_step_ms"]
        out[m]["gpu_step_overhead_pct"] = round(100 * (out[m]["gpu_step_ms"] / gb - 1), 2) if gb and out[m]["gpu_step_ms"] else None
    return out


def write(out_dir, runs, reps, cpus, meta=None):
    med = summary(runs, statistics.median)
    low = summary(runs, min)
    if meta is None:
        import torch

        meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    result = {"date": meta["date"], "gpu": meta["gpu"], "torch": meta["torch"], "reps": reps, "cpus": cpus, "medians": med, "minima": low, "runs": runs}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "agent_overhead.json"), "w") as f:
        json.dump(result, f, indent=1)
    spread = {m: (min(r["loop_ns"] for r in runs[m]), max(r["loop_ns"] for r in runs[m])) for m in modes_in(runs)}
    lines = [
        "# In-process overhead: the agent against PyTorch's own memory recording",
        "",
        "Command: `python3 bench/agent_overhead.py OUT_DIR --reps %d --cpus %s` on %s, torch %s, %s. Each mode in a fresh process pinned to CPUs %s, %d interleaved repetitions (the order rotates)."
        % (reps, cpus, result["gpu"], result["torch"], result["date"], cpus, reps),
        "",
        "## Medians over the repetitions",
        "",
    ]

    def table(t):
        gpu = any(r["gpu_step_ms"] is not None for r in t.values())
        rows = [
            "| mode | loop ns/iter | loop overhead | ns added per allocator event | training step ms | step overhead |" + (" GPU-bound step ms | its overhead |" if gpu else ""),
            "| --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if gpu else ""),
        ]
        for m, r in t.items():
            row = "| %s | %.0f | %+.2f%% | %.1f | %.3f | %+.2f%% |" % (m, r["loop_ns"], r["loop_overhead_pct"], r["loop_ns_added_per_event"], r["step_ms"], r["step_overhead_pct"])
            if gpu:
                row += " %s | %s |" % ("%.3f" % r["gpu_step_ms"] if r["gpu_step_ms"] is not None else "-", "%+.2f%%" % r["gpu_step_overhead_pct"] if r["gpu_step_overhead_pct"] is not None else "-")
            rows.append(row)
        return rows

    lines += table(med)
    lines += ["", "## Minima over the repetitions (each mode's least disturbed process)", ""]
    lines += table(low)
    lines += [
        "",
        "Loop ns/iter, fastest and slowest process per mode: "
        + ", ".join("%s %.0f–%.0f" % (m, a, b) for m, (a, b) in spread.items())
        + ". The same mode varies by up to 2x from one process to the next on this machine (pinned or not), more than any difference between modes:"
        " read the overheads as ranks and magnitudes, not as percentages to the decimal.",
        "",
        "Reading (minima): PyTorch's own cost of calling any allocator trace tracker is %.0f ns per event (tracker-empty), %+.1f%% on this loop;"
        " the agent's own work on top of it is %.0f ns per event; history-state costs %.0f ns and history-all %.0f ns per event."
        " The targets of 3%% on the loop and 1%% on the step are not shown by this run: the floor of any tracker is already above 3%% on a loop this"
        " tight, and the step's differences are inside the machine's noise."
        % (low["tracker-empty"]["loop_ns_added_per_event"], low["tracker-empty"]["loop_overhead_pct"],
           low["agent"]["loop_ns_added_per_event"] - low["tracker-empty"]["loop_ns_added_per_event"],
           low["history-state"]["loop_ns_added_per_event"], low["history-all"]["loop_ns_added_per_event"]),
        "",
        "loop: `torch.empty(4096 bytes, device='cuda')` then `del` (three allocator events: alloc, free_requested, free_completed); per process the median of 9 chunks of 20,000 after 20,000 to warm up.",
        "step: a 4-layer TransformerEncoder (d=128, batch 8×32) forward, backward and AdamW step: small enough to be bound by the CPU, where added host work shows most; per process the median of 7 chunks of 15 steps after 10 to warm up.",
        "tracker-empty = the agent with a trace tracker that returns at once: what PyTorch itself spends calling any allocator trace tracker, the floor for this design.",
        "agent = `gpumem_agent.attach()`: the allocator hook writing every event into the ring, the phase hooks (module forward hooks: global until the first optimizer step, then on the models only; backward wrapper; optimizer step hooks), the record_function callback and the agent's sync thread.",
    ]
    with open(os.path.join(out_dir, "agent_overhead.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


main()
