"""`gpumem-tui attach` on a torchrun DDP job started without the monitor (issue 25's whole-job check).
Run from the repository root on a machine with two GPUs or more, torch and transformers:

    python3 test/gpu/attach_ddp.py [--out bench/results/attach-ddp.json]

1. starts `torchrun --standalone --nproc_per_node N test/gpu/hf_gpt2.py --ddp` plainly (no agent on
   its path), N = the GPUs seen, and waits for 30 steps of every rank;
2. `bun src/cli.ts attach LAUNCHER_PID --no-monitor`: every rank attached, one line each;
3. a monitor (`bun src/cli.ts --json --interval 500`) from right after the attach for 6 s: detail
   never partial after the first step boundary; then `bun src/cli.ts --json --once`: every rank a
   process row with its allocator (hook mode, rank, the job), one job row with N ranks, reserved
   equal to torch's around that moment;
4. as an ordinary user (nobody, through setpriv): attach to a rank is refused, with its remedy;
5. `bun src/cli.ts detach PID` for each rank: files gone, training on; torchrun's exit status 0
   and every rank's final line written.

Prints the results as JSON (and writes them to --out); exit status 1 when a check fails.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_report import report  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=45, help="the job's training time")
ap.add_argument("--out")
args = ap.parse_args()

try:
    n = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
except FileNotFoundError:
    n = 0
if n < 2:
    sys.exit("attach_ddp: needs two GPUs or more (nvidia-smi -L lists %d)" % n)
work = tempfile.mkdtemp(prefix="gpumem-attach-ddp-")
os.chmod(work, 0o755)  # nobody's refusal must come from the attach, not from a directory
agents = os.path.join(work, "agents")
os.mkdir(agents, 0o700)
facts = os.path.join(work, "f.jsonl")
env = dict(os.environ, GPUMEM_TUI_DIR=agents, PYTHONUNBUFFERED="1")
env.pop("PYTHONPATH", None)
torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
job = subprocess.Popen([torchrun, "--standalone", "--nproc_per_node", str(n), "test/gpu/hf_gpt2.py", "--ddp", "--seconds", str(args.seconds),
                        "--facts", facts], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def rank_facts(r):
    try:
        with open("%s.rank%d" % (facts, r)) as f:
            return [json.loads(l) for l in f if l.endswith("\n")]
    except FileNotFoundError:
        return []


def cli(*a, user=None, timeout=120):
    argv = ["bun", "src/cli.ts", *a]
    if user:
        argv = ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", shutil.which("bun"), "src/cli.ts", *a]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).strip()


results, checks = {"gpus": n}, {}
try:
    end = time.time() + 240
    while time.time() < end and not all(len([f for f in rank_facts(r) if "step" in f and "final" not in f]) >= 30 for r in range(n)):
        if job.poll() is not None:
            sys.exit("the job ended early: %s" % job.stdout.read())
        time.sleep(0.5)
    t0 = time.time()
    rc, text = cli("attach", str(job.pid), "--no-monitor", "--timeout", "30")
    results.update(attach_status=rc, attach_lines=text.splitlines(), attach_seconds=round(time.time() - t0, 2))
    ranks = sorted(int(p) for p in re.findall(r"attached to process (\d+)", text))
    checks["every rank attached"] = rc == 0 and len(ranks) == n
    # A monitor from right after the attach, as the screens `attach` opens would be.
    stream_path = os.path.join(work, "stream.ndjson")
    monitor = subprocess.Popen(["bun", "src/cli.ts", "--json", "--interval", "500"], env=env, stdout=open(stream_path, "w"), stderr=subprocess.DEVNULL)
    time.sleep(6)
    before = {r: rank_facts(r)[-1] for r in range(n)}
    rc, doc = cli("--json", "--once")
    after = {r: rank_facts(r)[-1] for r in range(n)}
    d = json.loads(doc) if rc == 0 else {}
    monitor.terminate()
    monitor.wait()
    stream = [json.loads(l) for l in open(stream_path) if l.strip()]
    seen = [(doc_i, p) for doc_i, x in enumerate(stream) for p in x.get("processes", []) if p.get("pid") in ranks and p.get("pytorch") and p["pytorch"].get("profile")]
    after_first = [p["pytorch"]["profile"] for _, p in seen if p["pytorch"]["profile"]["step"] >= 1]
    results["stream"] = {"documents": len(stream), "rank_rows": len(seen), "after_first_step": len(after_first),
                         "partial_after_first_step": [x["detail"] for x in after_first if x["detail"]["partial"]][:3],
                         "seed": sorted({json.dumps((x["detail"].get("seed") or {}).get("state")) for x in after_first})}
    checks["never partial after the first step boundary (the monitor from the attach on)"] = len(after_first) >= n and not results["stream"]["partial_after_first_step"]
    rows = [p for p in d.get("processes", []) if p.get("pid") in ranks and p.get("pytorch")]
    results["rows"] = [{"pid": p["pid"], "device": p.get("device"), "rank": p["pytorch"].get("rank"), "job": p["pytorch"].get("job"),
                        "hook_mode": p["pytorch"].get("hook_mode"), "allocated_bytes": p["pytorch"].get("allocated_bytes"),
                        "reserved_bytes": p["pytorch"].get("reserved_bytes"), "partial": p["pytorch"]["profile"]["detail"]["partial"]} for p in rows]
    results["jobs"] = [{"id": j.get("id"), "launcher_pid": j.get("launcher_pid"), "world_size": j.get("world_size"), "missing_ranks": j.get("missing_ranks"), "n_ranks": len(j.get("ranks") or [])} for j in d.get("jobs", [])]
    results["torch_around"] = {r: [before[r].get("memory_allocated"), after[r].get("memory_allocated"), before[r].get("memory_reserved"), after[r].get("memory_reserved")] for r in range(n)}
    checks["a row with its allocator per rank"] = len(rows) == n and all(p["pytorch"].get("hook_mode") == "hook" for p in rows)
    checks["ranks told apart"] = sorted(p["pytorch"].get("rank") for p in rows) == list(range(n))
    checks["one job row of every rank"] = len(d.get("jobs", [])) == 1 and results["jobs"][0]["n_ranks"] == n
    # A `--once` that comes seconds later meets rings that lapped since the attach: partial, and said.
    results["once_partial_causes"] = [p["pytorch"]["profile"]["detail"].get("causes") for p in rows]
    # The training runs on between torch's two figures and the monitor's read: allocated within their range
    # and a step's own swing (reserved settles once the caches are warm: equal to both).
    by_rank = {p["pytorch"].get("rank"): p["pytorch"] for p in rows}
    checks["reserved equal to torch's"] = all(by_rank.get(r, {}).get("reserved_bytes") in (before[r].get("memory_reserved"), after[r].get("memory_reserved")) for r in range(n))
    # An ordinary user against root's rank: refused, with the remedy.
    rc, line = cli("attach", str(ranks[0] if ranks else job.pid), "--no-monitor", user="65534")
    results.update(nobody_status=rc, nobody_line=line)
    checks["an ordinary user is refused with its remedy"] = rc != 0 and "belongs to root" in line and "your own processes only" in line and "sudo" not in line
    lines = []
    for r in ranks:
        rc, line = cli("detach", str(r))
        lines.append(line)
    results["detach_lines"] = lines
    time.sleep(1.5)
    checks["detach leaves no file"] = os.listdir(agents) == []
    steps_then = {r: len(rank_facts(r)) for r in range(n)}
    time.sleep(2)
    checks["the job trains on after detach"] = job.poll() is None and all(len(rank_facts(r)) > steps_then[r] for r in range(n))
    out, _ = job.communicate(timeout=args.seconds + 120)
    results.update(job_status=job.returncode, job_tail=out.splitlines()[-4:])
    finals = [next((f for f in rank_facts(r) if f.get("final")), None) for r in range(n)]
    results["final_steps"] = [f and f.get("steps") for f in finals]
    checks["the job's exit status 0, every rank's final line"] = job.returncode == 0 and all(finals)
finally:
    if job.poll() is None:
        job.kill()
        job.wait()
    shutil.rmtree(work, ignore_errors=True)
report(results, checks, args.out)
