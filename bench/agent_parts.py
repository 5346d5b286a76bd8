"""Which part of the agent costs a training step, each measured against itself inside ONE process.

    python3 bench/agent_parts.py OUT_DIR [--quick] [--workloads launch_bound,gpu_bound,resnet50,compiled] [--parts a,b]
                                 [--rounds-launch 16] [--rounds-gpu 10] [--block-ms 120] [--cpus 2,3]
    python3 bench/agent_parts.py OUT_DIR --render OUT_DIR/agent_parts.json   (tables again, no GPU)

Fresh processes differ by a few percent from one another (bench/results/agent_overhead_gpt2*.md),
more than the parts to be found. Here the agent is attached once per workload (a process forked
after the imports, its model the first one the agent sees), warmed up past the first optimizer
step, and then each part is switched off and on again in alternating blocks of K steps (each block
after one untimed step, ended by torch.cuda.synchronize(); the order alternates on/off, off/on
from round to round, so a drift of the machine cancels). Per part: the paired differences on − off
of each round: their median and IQR, their mean with a bootstrap 95% interval, and the median as a
percentage of the step. The median reads per-step costs; the mean also counts what comes now and
then (the sync thread's 0.25 s beat, a reader's tick).

Parts (all on is the agent as shipped; every other part stays on while one is switched):
  null                 nothing switched: the method's own noise (an A/A pair)
  tracker              the hook's work per allocator event (record, totals; off: returns at once)
  ranges               the record_function callback, global, USER_SCOPE (off: removed from torch)
  module-hooks         phase hooks on the outermost models (the state after the first step)
  global-module-hooks  global module forward hooks as before the first step (added on top)
  autograd             torch.autograd.backward/grad wrapped
  optimizer-hooks      global optimizer step hooks (the step mark and its sync record)
  sync-thread          memory_stats every 0.25 s on the agent's thread (off: its work skipped)
  control-thread       the control socket's thread (off: stopped; on: a new one)
  reader               a process reading the ring as the monitor does, every 0.1 s (off: SIGSTOP)
  stacks               the hook's Python stacks as shipped (every allocation of 1 MiB or more,
                       smaller ones sampled by bytes: stacks.py; off: gpumem_hook_stacks(0, 0))
  all                  every part above but global-module-hooks, together

Workloads: launch_bound and gpu_bound are the transformers GPT-2 steps of agent_overhead_gpt2.py;
resnet50 is torchvision's ResNet50 (batch 32, 224 x 224, SGD with momentum); compiled is the
launch-bound GPT-2 under torch.compile (its compilation in the warm-up).

Torch's own cost of a tracker (it builds an entry per allocator event once one is attached, and
has no detach) is not switchable here: `agent_overhead_gpt2.py --modes none,tracker-bare` measures
it over fresh processes. Also measured here: µs per call of the agent's Python hooks.
Writes agent_parts.json and agent_parts.md into OUT_DIR.
"""
import argparse
import ctypes
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "agent"))

PARTS = ["null", "tracker", "ranges", "module-hooks", "global-module-hooks", "autograd", "optimizer-hooks",
         "sync-thread", "control-thread", "reader", "stacks", "all"]
WHAT = {
    "null": "nothing (A/A)", "tracker": "hook: per-event record", "ranges": "hook: record_function callback",
    "module-hooks": "hooks on the models", "global-module-hooks": "global module hooks (before step 1)",
    "autograd": "backward/grad wrapper", "optimizer-hooks": "optimizer step hooks", "sync-thread": "sync thread's work",
    "control-thread": "control thread", "reader": "a ring reader process", "stacks": "hook: Python stacks, sampled (shipped)",
    "all": "all but global module hooks",
}
# The Python stacks are on by default only where they cost at most this much of the step (issue 37).
STACKS_TARGET_PCT = 1.0
EXTRA_WORKLOADS = ("resnet50", "compiled")
# gpumem_hook_bench_set's parts (cuda/hook.cpp)
TARGETS_PCT = {"launch_bound": 3.0, "gpu_bound": 1.0, "resnet50": 1.0, "compiled": 3.0}
READER_TICK_S = 0.1

from agent_switches import close, switches  # noqa: E402  beside this file


# -- statistics ------------------------------------------------------------------------------------


def quantile(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(f * (len(xs) - 1))))]


def bootstrap(xs, fn, n=2000, seed=0):
    """A 95% interval of fn over resamples of xs."""
    rng = random.Random(seed)
    vals = sorted(fn([rng.choice(xs) for _ in xs]) for _ in range(n))
    return [vals[int(0.025 * n)], vals[int(0.975 * n) - 1]]


def paired(on, off):
    d = [a - b for a, b in zip(on, off)]
    base = statistics.median(off)
    med = statistics.median(d)
    return {
        "n": len(d), "on_ms": statistics.median(on), "off_ms": base, "median": med, "q1": quantile(d, 0.25), "q3": quantile(d, 0.75),
        "median_ci": bootstrap(d, statistics.median), "mean": statistics.fmean(d), "mean_ci": bootstrap(d, statistics.fmean),
        "pct": 100 * med / base, "mean_pct": 100 * statistics.fmean(d) / base,
    }


# -- the measurement (in the forked child) ---------------------------------------------------------


def block(torch, step, k):
    """One untimed step (what a switch disturbed settles), then k steps: (wall ms, CPU ms) a step."""
    step()
    torch.cuda.synchronize()
    w, c = time.perf_counter(), time.process_time()
    for _ in range(k):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - w) / k * 1000, (time.process_time() - c) / k * 1000


def measure(torch, step, sw, k, rounds):
    """Alternating blocks with the part on and off; the part left as shipped."""
    wall, cpu = {True: [], False: []}, {True: [], False: []}
    try:
        for r in range(rounds):
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                sw.set(on)
                w, c = block(torch, step, k)
                wall[on].append(w)
                cpu[on].append(c)
    finally:
        sw.set(sw.shipped)
    return {"wall": paired(wall[True], wall[False]), "cpu": paired(cpu[True], cpu[False])}


def per_call(fn, n):
    """µs per call of fn, the best of 5 runs of n calls."""
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t)
    return best / n * 1e6


def hook_calls(agent, torch, opt, n=20000):
    """µs per call of the agent's Python hooks, called directly (CPU only: a dummy module)."""
    from torch.nn.modules import module as nn_module

    from gpumem_agent.wire import ACTION, PHASE

    ph = agent.phases
    out = {}
    phase_mark, other = ACTION["phase"], PHASE["other"]
    mod = torch.nn.Identity()

    def add(name, fn, calls=n):
        try:
            out[name] = round(per_call(fn, calls), 3)
        except Exception as e:  # noqa: BLE001
            out[name] = "%s: %s" % (type(e).__name__, e)

    if agent.hook is not None:
        mark = agent.hook.gpumem_hook_mark
        add("ctypes mark (gpumem_hook_mark)", lambda: mark(phase_mark, other, ph.step))
    add("agent._mark", lambda: agent._mark(phase_mark, other, ph.step))
    pre, post = getattr(ph, "pre", None), getattr(ph, "post", None)
    if pre and post:
        add("module pre+post, outermost (two marks)", lambda: (pre(mod, ()), post(mod, (), None)))
        pre(mod, ())  # one level in: inner calls make no mark
        try:
            add("module pre+post, inner (no mark)", lambda: (pre(mod, ()), post(mod, (), None)))
        finally:
            post(mod, (), None)
        x = object()
        add("nn.Identity() call, no global hooks", lambda: mod(x))
        hs = [nn_module.register_module_forward_pre_hook(pre), nn_module.register_module_forward_hook(post)]
        try:
            pre(mod, ())
            try:
                add("nn.Identity() call, global hooks (inner)", lambda: mod(x))
            finally:
                post(mod, (), None)
        finally:
            for h in hs:
                h.remove()
    enter, leave = getattr(ph, "enter_backward", None), getattr(ph, "leave_backward", None)
    if enter and leave:
        add("backward enter+leave (two marks)", lambda: leave(enter()))
    op, oq = getattr(ph, "opt_pre", None), getattr(ph, "opt_post", None)
    if op and oq and opt is not None:
        # a step mark writes a sync record: the allocator's stats under its lock
        add("optimizer pre+post (two marks, one sync record)", lambda: (op(opt, (), {}), oq(opt, (), {})), n // 10)
    add("sync() (memory_stats into the header)", agent.sync, 200)
    if not getattr(ph, "on", True):  # a hook failed under these direct calls: said, not hidden
        out["phases"] = "turned off during these calls: %s" % getattr(agent, "notes", {}).get("phases")
    return out


def resnet50_step(torch, dev, batch=32):
    """One training step of torchvision's ResNet50 (from its constructor, no weights) on a fixed
    batch of 224 x 224 images, SGD with momentum."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(dev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)

    def step():
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def compiled_step(torch, dev, batch, seq):
    """The GPT-2 step with the model under torch.compile (default mode): inductor's kernels, the
    allocations its generated code makes."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_positions=256, n_embd=768, n_layer=12, n_head=12)).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    fwd = torch.compile(model)
    ids = torch.randint(0, 50257, (batch, seq), device=dev)

    def step():
        fwd(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def build_workload(torch, dev, workload):
    from agent_overhead_gpt2 import WORKLOADS, build_step

    if workload == "resnet50":
        return resnet50_step(torch, dev)
    if workload == "compiled":
        return compiled_step(torch, dev, *WORKLOADS["launch_bound"])
    return build_step(torch, dev, *WORKLOADS[workload])


def stacks_state(agent):
    """The agent's stack settings and what the hook has interned so far."""
    st = getattr(agent, "stacks", None)
    if st is None:
        return {"on": False, "note": getattr(agent, "notes", {}).get("stacks")}
    st.read_new()
    return {"on": True, "min_bytes": st.min_bytes, "sample_bytes": st.sample_bytes, "interned": len(st.table), "note": agent.notes.get("stacks")}


def stacks_taken(agent, torch, step, n=5):
    """Over n steps with the parts as shipped: allocations a step and how many carried a stack,
    from the agent's own ring (its records of those steps)."""
    from gpumem_agent.ring import RECORD_FIELDS

    ring = getattr(agent, "ring", None)
    if ring is None or not hasattr(ring, "lane_records"):
        return None
    act, extra = RECORD_FIELDS.index("action"), RECORD_FIELDS.index("extra")
    before = [ring.lane_written(lane) for lane in range(ring.n_lanes)]
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    allocs = taken = 0
    for lane in range(ring.n_lanes):
        for r in ring.lane_records(lane, before[lane]):
            if r[act] == 0:  # alloc
                allocs += 1
                taken += r[extra] != 0
    return {"steps": n, "allocs_per_step": allocs / n, "stacks_per_step": taken / n}


def child(workload, args):
    import torch

    import gpumem_agent

    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    dev = torch.device("cuda:0")
    torch.zeros(1, device=dev)
    torch.set_float32_matmul_precision("high")
    agent = gpumem_agent.attach()
    if agent is None or agent.mode != "hook":
        raise RuntimeError("the agent did not attach with its hook: %s" % getattr(agent, "hook_error", None))
    step = build_workload(torch, dev, workload)
    for _ in range(10):  # the first optimizer step narrows the module hooks to this model
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t) / 5 * 1000
    k = max(2, int(round(args.block_ms / step_ms)))
    rounds = args.rounds_launch if workload in ("launch_bound", "compiled") else args.rounds_gpu
    sw = switches(agent, torch)
    out = {"workload": workload, "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "step_ms": step_ms,
           "k": k, "rounds": rounds, "parts": {}, "hook_mode": agent.mode, "stacks": {"on": agent.stacks is not None, "note": agent.notes.get("stacks")}}
    try:
        for name in args.parts:
            s = sw.get(name)
            if s is None or s.why:
                out["parts"][name] = {"unavailable": s.why if s else "not set up"}
                continue
            t = time.perf_counter()
            try:
                out["parts"][name] = measure(torch, step, s, k, rounds)
            except Exception as e:  # noqa: BLE001 - one part's failure is its result
                out["parts"][name] = {"error": "%s: %s" % (type(e).__name__, e)}
            out["parts"][name]["seconds"] = round(time.perf_counter() - t, 1)
            print("  %-12s %-20s %s" % (workload, name, _line(out["parts"][name])), flush=True)
        try:  # what stacks did: said beside the figures, never at their expense
            out["stacks_after"] = stacks_state(agent)
            if out["stacks_after"].get("on"):
                out["stacks_after"]["taken"] = stacks_taken(agent, torch, step)
        except Exception as e:  # noqa: BLE001
            out["stacks_after"] = {"error": "%s: %s" % (type(e).__name__, e)}
        opt = next(iter(agent.phases.optimizers), None) if agent.phases else None
        out["hook_calls_us"] = hook_calls(agent, torch, opt, 2000 if args.quick else 20000)
    finally:
        close(sw)
    return out


def _line(p):
    if "wall" not in p:
        return p.get("unavailable") or p.get("error")
    w = p["wall"]
    return "Δ median %+.4f ms (%+.2f%%), mean %+.4f ms [%+.4f, %+.4f]" % (w["median"], w["pct"], w["mean"], *w["mean_ci"])


# -- the ring reader (a process of its own) --------------------------------------------------------


def reader(path):
    """Read the ring as the monitor does, every READER_TICK_S: the header, then each lane's new
    records (parsed). Ends when its parent does."""
    import mmap
    import struct

    from gpumem_agent import ring, wire

    parent = os.getppid()
    try:  # killed with its parent even while stopped (PR_SET_PDEATHSIG); not pinned with it
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    except (OSError, AttributeError):
        pass
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
    os.close(fd)
    u64 = struct.Struct("<Q")
    abi = struct.unpack_from("<I", m, wire.HEADER_OFFSET["abi_version"])[0]
    cap = u64.unpack_from(m, wire.HEADER_OFFSET["capacity"])[0]
    lanes = ring.lanes_of(abi, struct.unpack_from("<I", m, wire.HEADER_OFFSET["n_lanes"])[0])
    at = [u64.unpack_from(m, ring.write_index_offset(lane))[0] for lane in range(lanes)]
    while os.getppid() == parent:
        time.sleep(READER_TICK_S)
        bytes(m[: wire.HEADER_SIZE])
        for lane in range(lanes):
            w = u64.unpack_from(m, ring.write_index_offset(lane))[0]
            base = wire.HEADER_SIZE + lane * cap * wire.RECORD_SIZE
            for i in range(max(at[lane], w - cap), w):
                ring.RECORD.unpack_from(m, base + (i & (cap - 1)) * wire.RECORD_SIZE)
            at[lane] = w


# -- the parent: forks, tables -------------------------------------------------------------------


def markdown(result):
    rows = [
        "# What each part of the agent costs a GPT-2 training step (switched inside one process)",
        "",
        "Command: `%s` on %s, torch %s, transformers %s, %s." % (result["command"], result.get("gpu"), result["torch"], result["transformers"], result["date"]),
        "Per workload one process (forked after the imports) attaches the agent, takes 10 warm-up steps (the first optimizer step narrows"
        " the module hooks to the model), then per part alternates blocks of K steps with the part on and off (order alternating by"
        " round; one untimed step after each switch; each block ended by `torch.cuda.synchronize()`). Δ = on − off per round:"
        " median (IQR) and mean [bootstrap 95%]; % = median Δ over the median step with the part off. Every other part stays on"
        " (the agent as shipped); `global-module-hooks` is added on top of it.",
        "",
    ]
    for w in result["workloads"]:
        r = result["results"].get(w)
        if r is None:  # not run (yet): the file is rewritten after each workload
            continue
        if "error" in r:
            rows += ["## %s: failed" % w, "", r["error"], ""]
            continue
        rows += ["## %s (step %.2f ms, K = %d steps a block, %d rounds)" % (w, r["step_ms"], r["k"], r["rounds"]), "",
                 "| part | what | step off ms | Δ median ms (IQR) | Δ % | Δ mean ms [95%] | CPU Δ median ms | s |",
                 "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, p in r["parts"].items():
            if "wall" not in p:
                rows.append("| %s | %s | – | %s | | | | |" % (name, WHAT.get(name, ""), "not switchable: " + p["unavailable"] if "unavailable" in p else "error: " + p.get("error", "?")))
                continue
            x, c = p["wall"], p["cpu"]
            rows.append("| %s | %s | %.3f | %+.4f (%+.4f…%+.4f) | %+.2f%% | %+.4f [%+.4f, %+.4f] | %+.4f | %.0f |" % (
                name, WHAT.get(name, ""), x["off_ms"], x["median"], x["q1"], x["q3"], x["pct"], x["mean"], x["mean_ci"][0], x["mean_ci"][1],
                c["median"], p.get("seconds", 0)))
        st, sk = r.get("stacks_after") or r.get("stacks") or {}, r["parts"].get("stacks", {}).get("wall")
        if st.get("on") and "min_bytes" in st:
            tk = st.get("taken") or {}
            rows += ["", "Stacks as shipped: every allocation of %d bytes or more, smaller ones sampled at one per %d bytes allocated; %d distinct"
                     " stacks interned by the end%s." % (st["min_bytes"], st["sample_bytes"], st.get("interned", 0),
                                                         ("; %.0f of %.0f allocations a step carried a stack" % (tk["stacks_per_step"], tk["allocs_per_step"])) if tk else "")]
        elif "error" in st:
            rows += ["", "Stacks: their state could not be read (%s)." % st["error"]]
        elif st:
            rows += ["", "Stacks: off in this process (%s)." % (st.get("note") or "not started")]
        if sk:
            rows += ["Stacks cost %+.2f%% of the step (median; mean %+.2f%%, 95%% [%+.4f, %+.4f] ms), target ≤ %.0f%% to be on by default: **%s**"
                     " (the A/A row `null` is the method's noise)." % (sk["pct"], sk["mean_pct"], sk["mean_ci"][0], sk["mean_ci"][1], STACKS_TARGET_PCT,
                                                                        "MET" if sk["pct"] <= STACKS_TARGET_PCT else "MISSED")]
        a = r["parts"].get("all", {}).get("wall")
        if a:
            rows += ["", "All parts together: %+.2f%% of the step (median; mean %+.2f%%), target ≤ %.0f%% for the whole agent; torch's own cost of"
                     " a tracker comes on top (fresh processes: `agent_overhead_gpt2.py --modes none,tracker-bare`)." % (a["pct"], a["mean_pct"], TARGETS_PCT.get(w, 0))]
        calls = r.get("hook_calls_us")
        if calls:
            rows += ["", "µs per call of the agent's hooks (called directly, best of 5):", "", "| call | µs |", "| --- | ---: |"]
            rows += ["| %s | %s |" % (k, ("%.3f" % v) if isinstance(v, (int, float)) else v) for k, v in calls.items()]
        rows.append("")
    rows.append("The run took %.0f s (imports %.1f s)." % (result.get("elapsed_s", 0), result.get("import_s", 0)))
    return "\n".join(rows) + "\n"


def write(out_dir, result):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "agent_parts.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(os.path.join(out_dir, "agent_parts.md"), "w") as f:
        f.write(md)
    return md


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--reader":
        return reader(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--quick", action="store_true", help="fewer rounds and shorter blocks (about 90 s on an H100)")
    ap.add_argument("--workloads", default="launch_bound,gpu_bound")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--rounds-launch", type=int, default=None, help="on/off pairs per part, launch-bound (default 16; quick 8)")
    ap.add_argument("--rounds-gpu", type=int, default=None, help="on/off pairs per part, GPU-bound (default 10; quick 5)")
    ap.add_argument("--block-ms", type=float, default=None, help="timed length of a block (default 120; quick 80)")
    ap.add_argument("--cpus", default="", help="pin to these CPUs (e.g. 2,3 as agent_overhead_gpt2.py does); default: not pinned")
    ap.add_argument("--timeout", type=int, default=400, help="seconds a workload's process may take")
    ap.add_argument("--render", help="a run's JSON: write the tables again (no GPU needed)")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            print(write(args.out_dir, json.load(f)), end="")
        return
    args.rounds_launch = args.rounds_launch or (8 if args.quick else 16)
    args.rounds_gpu = args.rounds_gpu or (5 if args.quick else 10)
    args.block_ms = args.block_ms or (80.0 if args.quick else 120.0)
    args.parts, workloads = args.parts.split(","), args.workloads.split(",")
    from agent_overhead_gpt2 import WORKLOADS, run_forked

    known = list(WORKLOADS) + list(EXTRA_WORKLOADS)
    bad = [p for p in args.parts if p not in PARTS] + [w for w in workloads if w not in known]
    if bad or args.rounds_launch < 2 or args.rounds_gpu < 2 or args.block_ms <= 0:
        sys.stderr.write("agent_parts: unknown part or workload %s, or rounds below 2 or --block-ms not positive (parts: %s; workloads: %s)\n"
                         % (", ".join(bad) or "(none)", ", ".join(PARTS), ", ".join(known)))
        sys.exit(2)
    t0 = time.perf_counter()
    try:
        import torch  # once here; CUDA starts only in the forked children
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel  # noqa: F401 - loaded before the forks
        if "resnet50" in workloads:
            import torchvision  # noqa: F401
    except ImportError as e:
        sys.stderr.write("agent_parts: needs torch and transformers on a CUDA machine: %s\n" % e)
        sys.exit(2)

    result = {"command": "python3 bench/agent_parts.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "torch": torch.__version__, "transformers": transformers.__version__, "gpu": None, "workloads": workloads,
              "import_s": round(time.perf_counter() - t0, 1), "results": {}}
    agents_dir = tempfile.mkdtemp(prefix="gpumem-bench-agents-")
    os.environ["GPUMEM_TUI_DIR"] = agents_dir
    try:
        for w in workloads:
            print("%s: one process, %s" % (w, ", ".join(args.parts)), flush=True)
            r = run_forked(lambda: child(w, args), args.timeout)
            result["results"][w] = r
            result["gpu"] = result["gpu"] or r.get("gpu")
            result["elapsed_s"] = round(time.perf_counter() - t0, 1)
            write(args.out_dir, result)
    finally:
        import shutil

        shutil.rmtree(agents_dir, ignore_errors=True)
    print(write(args.out_dir, result), end="")


if __name__ == "__main__":
    main()
