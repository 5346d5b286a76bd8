#!/usr/bin/env python3
"""How fast test/gpu/ranks.sh's ranks allocated while the screens were measured: the steady window
(the 10 s after the `overview-200x60` capture in DIR/screens.txt, the host's clock), from torch's
own figures per rank and step (DIR/facts.tar.xz: f.jsonl.rank*, num_alloc and time). Two runs of
the job go at their own pace, so their monitors' CPU compares only beside this.
    python3 bench/support/ranks-rate.py RANKS_OUT_DIR [RANKS_OUT_DIR ...]
"""
import datetime
import io
import json
import re
import sys
import tarfile


def window_start(screens, day):
    m = re.search(r"===== overview-200x60 (\d+):(\d+):(\d+)", screens)
    if not m:
        raise SystemExit("no overview-200x60 capture in screens.txt")
    h, mi, s = map(int, m.groups())
    return day.replace(hour=h, minute=mi, second=s).timestamp()


def main():
    for d in sys.argv[1:]:
        screens = open(f"{d}/screens.txt", encoding="utf-8").read()
        total = 0.0
        lines = []
        with tarfile.open(f"{d}/facts.tar.xz") as tar:
            for member in sorted(tar.getmembers(), key=lambda x: x.name):
                if not member.name.startswith("f.jsonl.rank"):
                    continue
                rows = [json.loads(line) for line in io.TextIOWrapper(tar.extractfile(member), encoding="utf-8") if line.strip()]
                if not rows:
                    continue
                day = datetime.datetime.fromtimestamp(rows[0]["time"], datetime.timezone.utc)
                start = window_start(screens, day)
                w = [r for r in rows if start <= r["time"] <= start + 10]
                if len(w) < 2:
                    lines.append(f"  {member.name}: no steps in the window")
                    continue
                span = w[-1]["time"] - w[0]["time"]
                rate = (w[-1]["num_alloc"] - w[0]["num_alloc"]) / span
                steps = (w[-1]["step"] - w[0]["step"]) / span
                total += rate
                lines.append(f"  {member.name}: {rate:,.0f} allocations/s, {steps:.1f} steps/s")
        print(f"{d}: {total:,.0f} allocations/s over the ranks in the steady window")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
