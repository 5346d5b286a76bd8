#!/usr/bin/env python3
# The threads a process starts and ends over a while, and what the ended ones ran: a thread that ends
# between two reads of /proc takes its CPU out of every per-thread count (proc-usage.ts's "(ended
# threads, rounding)"). Lists /proc/PID/task every 20 ms; prints the threads born and ended by name
# (digits dropped), the CPU ticks the ended ones had at their last read, and the CPU of the whole
# process and of the threads alive at the end over the same span, in ticks (100 a second).
#   python3 bench/support/thread-churn.py PID SECONDS
import collections, os, re, sys, time

pid, secs = int(sys.argv[1]), float(sys.argv[2])

def snap():
    out = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            st = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue  # ended between the listing and its read
        name = re.sub(r"\d+", "", st[st.index("(") + 1 : st.rindex(")")])
        f = st[st.rindex(")") + 2 :].split()
        out[t] = (name, int(f[11]) + int(f[12]))
    return out

def total():
    try:
        f = open(f"/proc/{pid}/stat").read().split(") ")[1].split()
    except OSError:
        return None  # it ended
    return int(f[11]) + int(f[12])

born, ended, ended_ticks = collections.Counter(), collections.Counter(), collections.Counter()
first = prev = snap()
c0, t0 = total(), time.time()
c1, t1 = c0, t0
while time.time() - t0 < secs:
    time.sleep(0.02)
    c = total()
    cur = snap()
    if not cur or c is None:
        break  # the process ended: the span is up to its last read
    c1, t1 = c, time.time()
    for t, (name, _) in cur.items():
        if t not in prev:
            born[name] += 1
    for t, (name, ticks) in prev.items():
        if t not in cur:
            ended[name] += 1
            ended_ticks[name] += ticks - first.get(t, (name, 0))[1]
    prev = cur
span = t1 - t0
whole = c1 - c0
alive = sum(ticks - first.get(t, (name, 0))[1] for t, (name, ticks) in prev.items())
print(f"over {span:.1f} s: the process {whole} ticks, the threads alive at the end {alive}, ended threads {sum(ended_ticks.values())} (at their last read)")
print("born:", dict(born))
print("ended:", dict(ended))
print("ended threads' ticks:", dict(ended_ticks))
print("alive at the end:", dict(collections.Counter(n for n, _ in prev.values())))
