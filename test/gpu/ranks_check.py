"""Checks of a test/gpu/ranks.sh run, as a user would look: writes DIR/ranks.md and DIR/ranks.json.

    python3 test/gpu/ranks_check.py DIR
"""
import glob
import io
import json
import os
import re
import sys
import tarfile

out = sys.argv[1]
screens = open(os.path.join(out, "screens.txt")).read() if os.path.exists(os.path.join(out, "screens.txt")) else ""
docs = {}
for line in open(os.path.join(out, "docs.ndjson")) if os.path.exists(os.path.join(out, "docs.ndjson")) else []:
    try:
        d = json.loads(line)
        docs[d["label"]] = d["doc"]
    except (ValueError, KeyError):
        pass
facts = {}  # rank -> {step: memory_allocated}
if os.path.exists(os.path.join(out, "facts.tar.xz")):
    with tarfile.open(os.path.join(out, "facts.tar.xz")) as t:
        for m in t.getmembers():
            if not re.search(r"\.rank\d+$", m.name):
                continue  # hook.txt: where the hook was built
            r = int(m.name.rsplit("rank", 1)[1])
            facts[r] = {}
            for line in io.TextIOWrapper(t.extractfile(m)):
                f = json.loads(line)
                if "step" in f and "memory_allocated" in f and not f.get("final"):
                    facts[r][f["step"]] = f["memory_allocated"]
n = len(facts) or 2


def section(name):
    m = re.search(r"===== %s [^\n]*\n(.*?)(?======|\Z)" % re.escape(name), screens, re.S)
    return m.group(1) if m else ""


checks = []


def check(name, ok, detail):
    checks.append({"name": name, "passed": bool(ok), "detail": detail})


ov = section("overview-200x60")
check("every GPU's panel", all(re.search(r"GPU %d\b" % g, ov) for g in range(n)), [l for l in ov.splitlines() if l.strip().startswith("GPU ")])
job_rows = [l for l in ov.splitlines() if re.search(r"\bjob\b", l) and "%d/%d" % (n, n) in l]
check("the job's row with all %d ranks" % n, job_rows, job_rows[:2])
peak_note = [l.strip() for l in ov.splitlines() if "peaks" in l]
check("the rank that peaks above the others, named on screen", any("rank %d peaks" % (n - 1) in l for l in peak_note), peak_note[:2])
small = section("overview-80x24")
check("80×24 still shows the job", any(re.search(r"\bjob\b", l) for l in small.splitlines()) and len(small.splitlines()) <= 24, small.splitlines()[:3])

run = docs.get("running", {})
jobs = run.get("jobs") or []
job = jobs[0] if jobs else {}
check("--json --once: one job of %d ranks, running" % n, len(job.get("ranks", [])) == n and job.get("state") == "running", {k: job.get(k) for k in ("id", "world_size", "state", "peak_rank", "peak_margin_bytes")})
equal, compared = [], 0
# From the monitor that watched from the start (ranks.sh's stream); the `--once` above came later.
stream = docs.get("stream-running") or run
for p in stream.get("processes", []):
    prof = (p.get("pytorch") or {}).get("profile") or {}
    ls = prof.get("last_step") or {}
    rank = (p.get("pytorch") or {}).get("rank")
    if rank is None or not ls:
        continue
    compared += 1
    want = facts.get(rank, {}).get(ls.get("step", -1) + 1)
    equal.append({"rank": rank, "step": ls.get("step"), "torch_allocated_at_end_bytes": ls.get("torch_allocated_at_end_bytes"), "torch_memory_allocated": want, "partial": prof.get("detail", {}).get("partial")})
check("each rank's step total equals torch's memory_allocated() at that step (a monitor watching from the start)", compared == n and all(e["torch_allocated_at_end_bytes"] == e["torch_memory_allocated"] and not e["partial"] for e in equal), equal)
check("the peak rank in the document is rank %d" % (n - 1), job.get("peak_rank") == n - 1, job.get("peak_rank"))

after = docs.get("after-kill", {})
ajob = (after.get("jobs") or [{}])[0]
# A `--once` that never saw the killed rank run finds its files stale and says the rank is missing;
# the screens, which saw it run, say it died.
# Where the launcher had stopped every rank within those 1.5 s, nothing of the job is left to list.
gone = not ajob and not [p for p in after.get("processes", []) if (p.get("pytorch") or {}).get("job")]
check("after the kill: the job is incomplete, rank %d exited or missing (or every rank gone)" % (n - 1), gone or (ajob.get("state") == "incomplete" and (any(r.get("rank") == n - 1 and r.get("exited") for r in ajob.get("ranks", [])) or n - 1 in (ajob.get("missing_ranks") or []))),
      {"state": ajob.get("state"), "ranks": [(r.get("rank"), r.get("exited")) for r in ajob.get("ranks", [])], "missing_ranks": ajob.get("missing_ranks"), "every_rank_gone": gone})
ak = section("after-kill")
said = [l.strip() for l in ak.splitlines() if "incomplete:" in l]
check("after the kill, on screen: 'incomplete: rank %d killed or crashed' (src/system/jobs.ts)" % (n - 1), any(re.search(r"incomplete: rank %d (died first \(killed or crashed\)|killed or crashed)" % (n - 1), l) for l in said), said[:2])

mon = open(os.path.join(out, "monitor.txt")).read() if os.path.exists(os.path.join(out, "monitor.txt")) else ""
m = re.search(r"(\d+) ticks of CPU over (\d+) ms \(CLK_TCK (\d+)\).*VmHWM:\s*(\d+) kB", mon)
cpu = round(int(m.group(1)) / int(m.group(3)) / (int(m.group(2)) / 1000) * 100, 2) if m else None
check("the monitor following %d busy agents: CPU and memory measured" % n, cpu is not None, {"cpu_percent_of_a_core": cpu, "peak_rss_mb": round(int(m.group(4)) / 1024, 1) if m else None})

st = re.search(r"steady: monitor pid \d+: (\d+) ticks of CPU over (\d+) ms", mon)
steady = round(int(st.group(1)) / 100 / (int(st.group(2)) / 1000) * 100, 2) if st else None
check("the screens following %d busy ranks, no key: at most 8%% of a core (issue 27)" % n, steady is not None and steady <= 8, {"cpu_percent_of_a_core": steady})
json.dump({"ranks": n, "checks": checks, "monitor_cpu_percent": cpu, "monitor_steady_cpu_percent": steady}, open(os.path.join(out, "ranks.json"), "w"), indent=1)
with open(os.path.join(out, "ranks.md"), "w") as f:
    f.write("# %d ranks under `gpumem-tui run` (test/gpu/ranks.sh)\n\n| check | result | detail |\n| --- | --- | --- |\n" % n)
    for c in checks:
        f.write("| %s | %s | `%s` |\n" % (c["name"], "pass" if c["passed"] else "**FAIL**", json.dumps(c["detail"])[:300].replace("|", "\\|")))
print(open(os.path.join(out, "ranks.md")).read())
