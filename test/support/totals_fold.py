"""The agent's totals (gpumem_agent.totals, what its line profiler uses) over every record of a
recording, for test/profiler/totals-rule.test.ts: the totals at each sync record and at the end,
one JSON object a line, as test/support/totals_fold.c prints the hook's.
    python3 totals_fold.py RING"""
import json
import sys

from gpumem_agent.ring import Ring
from gpumem_agent.totals import Totals
from gpumem_agent.wire import ACTION, FIRST_MARK, MAX_DEVICES, RECORD_FIELDS, SYNC_UNSURE

F = {f: RECORD_FIELDS.index(f) for f in ("action", "device", "address", "size", "stream", "extra")}


def main(path):
    ring = Ring(path, create=False)
    totals = {}
    for rec in ring.records():
        a, d = rec[F["action"]], rec[F["device"]]
        if not 0 <= d < MAX_DEVICES:
            continue
        if a == ACTION["sync"]:
            t = totals.get(d) or Totals()
            extra = rec[F["extra"]]
            torch = [rec[F["address"]], rec[F["size"]], rec[F["stream"]], -1 if extra == SYNC_UNSURE else extra]
            print(json.dumps({"sync": d, "torch": torch, "at": t.as_dict()}))
        elif a < FIRST_MARK:
            totals.setdefault(d, Totals()).apply(a, rec[F["size"]])
    for d in sorted(totals):
        print(json.dumps({"end": d, "at": totals[d].as_dict()}))
    ring.close()


if __name__ == "__main__":
    main(sys.argv[1])
