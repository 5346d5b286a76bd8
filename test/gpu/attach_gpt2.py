"""`gpumem-tui attach` on a GPT-2 training that was started without the monitor (issue 25's GPU
check). Run from the repository root on a GPU machine with torch and transformers:

    python3 test/gpu/attach_gpt2.py [--leak] [--out bench/results/attach-gpt2.json]

1. starts test/gpu/attach_train.py with plain python (no agent), lets it run 100 steps;
2. `bun src/cli.ts attach PID --no-monitor` (the hook may compile the first time), then a monitor
   (`bun src/cli.ts --json --interval 500`) reads it from right after the attach to the end;
3. checks, on every document from the first step boundary after the attach: block detail never
   partial, the seed applied; and with the training paused (allocator state fixed): allocated and
   reserved equal to torch's own, parameters, gradients or optimizer state named, ranges named;
4. the step time before and after the attach (median of 50 steps each, the GPU synchronized every
   step); with --leak, the growth finding within 1% of torch's own growth per step;
5. `bun src/cli.ts detach PID`: the agent's files go, the training runs on.

Prints the results as JSON (and writes them to --out); exit status 1 when a check fails.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_report import report  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--leak", action="store_true")
ap.add_argument("--before", type=int, default=100, help="steps before the attach")
ap.add_argument("--after", type=int, default=150, help="steps after the attach before the paused check")
ap.add_argument("--cycles", type=int, default=0,
                help="after the detach: this many detach/attach cycles, 50 steps each way, without a monitor (the step time attached against detached)")
ap.add_argument("--out")
args = ap.parse_args()

work = tempfile.mkdtemp(prefix="gpumem-attach-gpu-")
agents = os.path.join(work, "agents")
os.mkdir(agents, 0o700)
control = os.path.join(work, "control")
os.mkdir(control)
facts_path = os.path.join(work, "facts.jsonl")
env = dict(os.environ, GPUMEM_TUI_DIR=agents)
env.pop("PYTHONPATH", None)  # no agent on the training's path: started as a user would
train = subprocess.Popen([sys.executable, "test/gpu/attach_train.py", "--facts", facts_path, "--control", control] + (["--leak"] if args.leak else []),
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
pid = int(train.stdout.readline().split()[-1])


def facts():
    with open(facts_path) as f:
        return [json.loads(l) for l in f if l.endswith("\n")]


def wait_step(n, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        fs = [f for f in facts() if "step_ms" in f]
        if fs and fs[-1]["step"] >= n:
            return fs
        if train.poll() is not None:
            sys.exit("the training ended: %s" % train.stdout.read())
        time.sleep(0.2)
    sys.exit("no step %d within %d s" % (n, timeout))


def cli(*a, timeout=300):
    t = time.time()
    p = subprocess.run(["bun", "src/cli.ts", *a], env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).strip(), time.time() - t


results = {"pid": pid, "leak": args.leak}
checks = {}
try:
    wait_step(args.before)
    rc, line, secs = cli("attach", str(pid), "--no-monitor", "--timeout", "30")
    attached_step = facts()[-1]["step"]
    results.update(attach_status=rc, attach_line=line, attach_seconds=round(secs, 2), attached_after_step=attached_step)
    checks["attach succeeded"] = rc == 0
    doc_path = os.path.join(work, "docs.ndjson")
    monitor = subprocess.Popen(["bun", "src/cli.ts", "--json", "--interval", "500"], env=env, stdout=open(doc_path, "w"), stderr=subprocess.DEVNULL)
    wait_step(attached_step + args.after)
    open(os.path.join(control, "pause"), "w").close()
    while not any(f.get("paused") for f in facts()):
        time.sleep(0.1)
    paused = [f for f in facts() if f.get("paused")][-1]
    time.sleep(6)  # the agent's sync (0.25 s) and names asked at a step (answered after 3 s without one)
    monitor.terminate()
    monitor.wait()
    docs = [json.loads(l) for l in open(doc_path) if l.strip()]
    rows = [(d, next((p for p in d.get("processes", []) if p.get("agent_pid") == pid or p.get("pid") == pid), None)) for d in docs]
    rows = [(d, p) for d, p in rows if p and p.get("pytorch") and p["pytorch"].get("profile")]
    after_first = [p for _, p in rows if p["pytorch"]["profile"]["step"] >= 1]
    partial = [p["pytorch"]["profile"]["detail"] for p in after_first if p["pytorch"]["profile"]["detail"]["partial"]]
    last = rows[-1][1]["pytorch"] if rows else {}
    prof = last.get("profile") or {}
    names = {t["name"]: t["category"] for t in prof.get("largest_tensors", []) if t.get("name")}
    ranges = [r["name"] for r in ((prof.get("last_step") or {}).get("ranges") or [])]
    results.update(documents=len(docs), documents_after_first_step=len(after_first), partial_documents=partial[:3],
                   seed=(prof.get("detail") or {}).get("seed"), attached_unix_ns=last.get("attached_unix_ns"),
                   paused_torch={k: paused[k] for k in ("step", "memory_allocated", "memory_reserved")},
                   monitor={"allocated_bytes": last.get("allocated_bytes"), "reserved_bytes": last.get("reserved_bytes"), "step": prof.get("step")},
                   named_tensors=names, ranges=ranges)
    checks["documents after the first step boundary"] = len(after_first) > 0
    checks["never partial after the first step boundary"] = not partial
    checks["seed applied"] = (results["seed"] or {}).get("state") == "applied"
    checks["attached at … in the document"] = isinstance(last.get("attached_unix_ns"), int)
    checks["allocated equal to torch's"] = last.get("allocated_bytes") == paused["memory_allocated"]
    checks["reserved equal to torch's"] = last.get("reserved_bytes") == paused["memory_reserved"]
    checks["parameters named"] = "parameter" in names.values()
    checks["optimizer state named"] = "optimizer_state" in names.values()
    checks["ranges named"] = "train_step" in ranges
    # step time: 50 steps before the attach against 50 steps after it (5 left out on each side)
    os.unlink(os.path.join(control, "pause"))
    fs = [f for f in facts() if "step_ms" in f]
    before = [f["step_ms"] for f in fs if attached_step - 55 < f["step"] <= attached_step - 5]
    after = [f["step_ms"] for f in fs if attached_step + 5 < f["step"] <= attached_step + 55]
    results.update(step_ms_before=round(statistics.median(before), 3), step_ms_after=round(statistics.median(after), 3))
    results["step_time_change"] = round(results["step_ms_after"] / results["step_ms_before"] - 1, 4)
    if args.leak:
        growth = next((f for f in prof.get("findings", []) if f["id"] == "growth"), None)
        named = growth["numbers"]["growth_per_step_bytes"] if growth else None
        # torch's own growth over the steps the finding spans: the monitor counts steps from the
        # attach, the program from its start (the offset: their steps at the pause). The block a
        # kept tensor takes is not always its request (an unsplit remainder stays with it), so the
        # growth varies from step to step and two different windows need not agree to 1%.
        offset = paused["step"] - prof.get("step", 0)
        by_step = {f["step"]: f["memory_allocated"] for f in fs}
        true = None
        if growth:
            a, b = growth["numbers"]["first_step"] + offset, growth["numbers"]["last_step"] + offset
            if a in by_step and b in by_step and b > a:
                true = (by_step[b] - by_step[a]) / (b - a)
        results.update(torch_growth_per_step_bytes=round(true) if true else None, named_growth_per_step_bytes=named,
                       finding_steps=[growth["numbers"]["first_step"], growth["numbers"]["last_step"]] if growth else None,
                       step_offset=offset, kept_tensor_bytes=8 * 50257 * 4)
        checks["growth finding within 1% of torch's"] = named is not None and true is not None and abs(named - true) / true <= 0.01
    rc, line, _ = cli("detach", str(pid))
    time.sleep(1)
    results["detach_line"] = line
    checks["detach leaves no file"] = rc == 0 and os.listdir(agents) == []
    before_n = facts()[-1]["step"]
    time.sleep(2)
    checks["the training runs on after detach"] = train.poll() is None and facts()[-1]["step"] > before_n
    # The step time attached against detached, in turns within this one process (fresh processes
    # differ by more than the agent costs): each window 50 steps, 5 left out after each switch. A
    # detach leaves torch's tracker registered (torch cannot remove one), reduced to a flag check.
    windows = []
    for c in range(args.cycles):
        for state in ("detached", "attached"):
            s0 = facts()[-1]["step"]
            ms = [f["step_ms"] for f in wait_step(s0 + 55) if s0 + 5 < f["step"] <= s0 + 55]
            windows.append({"state": state, "from_step": s0 + 6, "median_ms": round(statistics.median(ms), 3)})
            rc, line, secs = cli("detach" if state == "attached" else "attach", str(pid), *(() if state == "attached" else ("--no-monitor", "--timeout", "30")))
            if rc != 0:
                windows.append({"state": "failed", "line": line})
                break
    if windows:
        pairs = [(a["median_ms"], b["median_ms"]) for a, b in zip(windows[::2], windows[1::2]) if b["state"] == "attached"]
        results["cycles"] = windows
        results["cycle_change_median"] = round(statistics.median(b / a - 1 for a, b in pairs), 4) if pairs else None
        checks["every cycle attached and detached"] = all(w["state"] != "failed" for w in windows)
finally:
    try:
        results["step_ms_series"] = [round(f["step_ms"], 2) for f in facts() if "step_ms" in f]
    except Exception:
        pass
    train.kill()
    train.wait()
    shutil.rmtree(work, ignore_errors=True)
report(results, checks, args.out)
