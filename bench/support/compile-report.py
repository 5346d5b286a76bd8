#!/usr/bin/env python3
# What JSC compiled and when, from a compile report and its marks (bench/support/stamp-stderr.sh):
# the compiler's milliseconds by WINDOW seconds, and after AFTER seconds the functions that took the
# most (milliseconds, compiles, tiers). A line's time is its first mark at or past its end (within a
# second of when it was written).
#   python3 bench/support/compile-report.py LOG [AFTER_S] [WINDOW_S] [TOP]
import bisect, collections, re, sys

log = sys.argv[1]
after = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
window = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
top = int(sys.argv[4]) if len(sys.argv) > 4 else 12
marks = [tuple(map(float, l.split())) for l in open(log + ".marks") if len(l.split()) == 2]
if not marks:
    sys.exit(f"{log}.marks: no marks")
t0 = marks[0][0]
sizes = [m[1] for m in marks]
line_re = re.compile(r"Optimized (\S*?)#\S* .* using (\w+) with \w+ into \d+ bytes in ([\d.]+) ms")
by_window = collections.Counter()
late = collections.defaultdict(lambda: [0.0, 0, collections.Counter()])
total = 0.0
end = 0
with open(log, "rb") as f:
    for raw in f:
        end += len(raw)
        m = line_re.search(raw.decode("utf8", "replace"))
        if not m:
            continue
        i = bisect.bisect_left(sizes, end)
        t = (marks[min(i, len(marks) - 1)][0]) - t0
        ms = float(m.group(3))
        total += ms
        by_window[int(t // window) * int(window)] += ms
        if t >= after:
            e = late[m.group(1) or "(anonymous)"]
            e[0] += ms
            e[1] += 1
            e[2][m.group(2)] += 1
span = marks[-1][0] - t0
print(f"{log}: {total:.0f} ms of compiles over {span:.0f} s; by {window:.0f} s: " + " ".join(f"{w}:{by_window[w]:.0f}" for w in sorted(by_window)))
late_ms = sum(e[0] for e in late.values())
print(f"  after {after:.0f} s: {late_ms:.0f} ms ({late_ms / 10 / max(span - after, 1e-9):.2f}% of a core), the most:")
for name, (ms, n, tiers) in sorted(late.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"    {ms:8.1f} ms {n:4d}x  {name}  ({', '.join(f'{k} {v}' for k, v in tiers.most_common())})")
