#!/usr/bin/env python3
# Where a process's JavaScript thread spent its samples after its first AFTER seconds (past the
# engine's compiles), from Bun's raw profile (bun --cpu-prof: a .cpuprofile, gzip'd or not):
# per function, the samples it was on the stack of (inclusive) and on top of (self), the most first.
#   python3 bench/support/prof-after.py PROFILE [AFTER_S] [TOP] [MATCH]
# The markdown profile's Self/Total weigh each sample by the wall time since the one before (idle
# waits included); these are counts of samples, the CPU's.
import collections, gzip, json, sys

path = sys.argv[1]
after = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
match = sys.argv[4] if len(sys.argv) > 4 else ""
p = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
nodes = {n["id"]: n for n in p["nodes"]}
parent = {c: n["id"] for n in p["nodes"] for c in n.get("children", [])}

def key(nid):
    cf = nodes[nid]["callFrame"]
    return f"{cf['functionName'] or '(anonymous)'} {cf['url'].split('/')[-1]}:{cf['lineNumber'] + 1}"

t = p["startTime"]
own, incl = collections.Counter(), collections.Counter()
n = 0
for s, d in zip(p["samples"], p["timeDeltas"]):
    t += d
    if (t - p["startTime"]) / 1e6 < after:
        continue
    n += 1
    own[key(s)] += 1
    seen, nid = set(), s
    while nid is not None:
        k = key(nid)
        if k not in seen:
            incl[k] += 1
            seen.add(k)
        nid = parent.get(nid)
span = (p["endTime"] - p["startTime"]) / 1e6 - after
print(f"{n} samples in the {span:.1f} s after {after:g} s ({path})")
print("inclusive  self  function")
for k, v in incl.most_common():
    if match in k and top > 0:
        print(f"{v:9d} {own[k]:5d}  {k}")
        top -= 1
