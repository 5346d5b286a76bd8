"""What the agent costs a training process, side by side with PyTorch's own memory recording.

    python3 bench/agent_overhead.py [OUT_DIR] [--reps N]

Modes, each in a fresh process (a recorder cannot be fully removed once attached), interleaved
across repetitions so that drift in the machine hits every mode alike:
  none          no monitoring
  tracker-empty the agent with a trace tracker that returns at once: what PyTorch itself spends to
                call any allocator trace tracker (the floor for this design)
  agent         gpumem_agent.attach(): the allocator hook, phase hooks, sync thread
  history-state torch.cuda.memory._record_memory_history(enabled="state")
  history-all   torch.cuda.memory._record_memory_history()  (the default: all, with stacks)
Workloads, in the same process:
  loop   torch.empty(4096 bytes) / del, 200k times: ns per iteration (3 allocator events each)
  step   a small, CPU-bound transformer's training step (forward, backward, AdamW): ms per step
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
MODES = ["none", "tracker-empty", "agent", "history-state", "history-all"]

CHILD = r"""
import os, sys, time, json
import torch
mode = sys.argv[1]
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

def loop(n):
    for _ in range(n):
        x = torch.empty(4096, dtype=torch.uint8, device=dev)
        del x

loop(20000)
t = time.perf_counter_ns(); loop(200000); loop_ns = (time.perf_counter_ns() - t) / 200000

torch.manual_seed(0)
layer = lambda: torch.nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
m = torch.nn.Sequential(*[layer() for _ in range(4)], torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randn(8, 32, 128, device=dev); y = torch.randint(0, 10, (8 * 32,), device=dev)
def step():
    out = m(x).reshape(-1, 10)
    torch.nn.functional.cross_entropy(out, y).backward()
    opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(20): step()
torch.cuda.synchronize()
times = []
for _ in range(5):
    t = time.perf_counter(); [step() for _ in range(40)]; torch.cuda.synchronize(); times.append((time.perf_counter() - t) / 40 * 1000)
print(json.dumps({"mode": mode, "loop_ns": loop_ns, "step_ms": sorted(times)[2]}))
"""


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else os.path.join(HERE, "results")
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "agent") + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    env.setdefault("GPUMEM_TUI_DIR", "/tmp/gpumem-bench-agents")
    runs = {m: [] for m in MODES}
    for rep in range(reps):
        order = MODES[rep % len(MODES):] + MODES[: rep % len(MODES)]  # rotate who goes first
        for mode in order:
            p = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit("mode %s failed:\n%s" % (mode, p.stderr[-2000:]))
            runs[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = {m: {"loop_ns": statistics.median(r["loop_ns"] for r in runs[m]), "step_ms": statistics.median(r["step_ms"] for r in runs[m])} for m in MODES}
    base = med["none"]
    for m in MODES:
        med[m]["loop_overhead_pct"] = round(100 * (med[m]["loop_ns"] / base["loop_ns"] - 1), 2)
        med[m]["step_overhead_pct"] = round(100 * (med[m]["step_ms"] / base["step_ms"] - 1), 2)
        med[m]["loop_ns_added_per_event"] = round((med[m]["loop_ns"] - base["loop_ns"]) / 3, 1)
    import torch

    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "reps": reps, "medians": med, "runs": runs}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "agent_overhead.json"), "w") as f:
        json.dump(result, f, indent=1)
    lines = [
        "# In-process overhead: the agent against PyTorch's own memory recording",
        "",
        "Command: `python3 bench/agent_overhead.py` on %s, torch %s, %s. Each mode in a fresh process, %d interleaved repetitions (the order rotates), medians."
        % (result["gpu"], result["torch"], result["date"], reps),
        "",
        "| mode | loop ns/iter | loop overhead | ns added per allocator event | training step ms | step overhead |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for m in MODES:
        r = med[m]
        lines.append("| %s | %.0f | %+.2f%% | %.1f | %.3f | %+.2f%% |" % (m, r["loop_ns"], r["loop_overhead_pct"], r["loop_ns_added_per_event"], r["step_ms"], r["step_overhead_pct"]))
    lines += [
        "",
        "loop: `torch.empty(4096 bytes, device='cuda')` then `del`, 200,000 times (three allocator events: alloc, free_requested, free_completed).",
        "step: a 4-layer TransformerEncoder (d=128, batch 8×32) forward, backward and AdamW step: small enough to be bound by the CPU, where added host work shows most.",
        "agent = `gpumem_agent.attach()`: the allocator hook writing every event into the ring, the phase hooks (global module forward hooks, backward wrapper, optimizer step hooks) and the agent's sync thread.",
    ]
    with open(os.path.join(out_dir, "agent_overhead.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


main()
