"""Whether a document's findings name the program's lines (issue 37), against the program's own
marks (test/gpu/lines_train.py's facts):

    python3 bench/gpu-parts/lines_check.py LABEL DOC.json FACTS.json ID:MARK[,MARK...] ...

DOC: one JSON document of the monitor (a `run --json` line, `--json --once`, a `replay --json`
final state); its findings are found wherever they lie (objects with id, title and evidence). Each
ID:MARK asks that a finding of that id say `FILE:LINE` of each mark (FILE the program's file name).
Prints one line per check, `PASS` or `FAIL`, with the finding's title; exit 0 where all pass.
"""
import json
import sys


def findings_of(doc):
    out = []

    def walk(x):
        if isinstance(x, dict):
            if {"id", "title", "evidence"} <= x.keys():
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return out


def main():
    label, doc_path, facts_path, checks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    try:
        with open(facts_path) as f:
            facts = json.load(f)
        marks = facts["marks"]
    except (OSError, ValueError, KeyError) as e:
        print("FAIL %s: no facts at %s (%s: the program did not finish)" % (label, facts_path, type(e).__name__))
        return 1
    base = marks["filename"].split("/")[-1]
    try:
        with open(doc_path) as f:
            doc = json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as e:
        print("FAIL %s: no document at %s (%s)" % (label, doc_path, e))
        return 1
    fs = findings_of(doc)
    ok = True
    for check in checks:
        fid, names = check.split(":", 1)
        mine = [f for f in fs if f["id"] == fid]
        for name in names.split(","):
            at = "%s:%d" % (base, marks["lines"][name])
            hit = [f for f in mine if at in json.dumps(f)]
            ok = ok and bool(hit)
            # No such finding: whether the program did what it meant to (its asks that should fail).
            asked = {k: v for k, v in facts.items() if k.endswith("_failed")}
            title = (hit or mine or [{"title": "(no %s finding; ids: %s; the program's %s)" % (fid, sorted({f['id'] for f in fs}), asked or "facts name no failed ask")}])[0]["title"]
            print("%s %s: %s names %s (%s): %s" % ("PASS" if hit else "FAIL", label, fid, at, name, title))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
