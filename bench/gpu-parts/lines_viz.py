"""A snapshot the monitor wrote (`d`, `replay --snapshot`) opened as memory_viz opens it, and the
user's frames in it (issue 37):

    python3 bench/gpu-parts/lines_viz.py SNAPSHOT.pickle[.gz] FACTS.json [NAME]

Runs torch.cuda._memory_viz's segment_plot and trace_plot on it (what pytorch.org/memory_viz draws,
from the same pickle) and counts the blocks and trace entries whose frames hold a `line:NAME` mark of
the program that made it (FACTS: test/gpu/lines_train.py's facts, `marks`). One JSON line on stdout:
{"ok", "segments", "blocks", "blocks_with_frames", "trace_entries", "marked": {name: blocks + entries},
"plots": {"segment_plot": chars, "trace_plot": chars} or the error}. Exit 0 where the plots were
made and the NAME mark (default keep) is found, else 1.
"""
import gzip
import json
import pickle
import sys


def main():
    path, facts_path = sys.argv[1], sys.argv[2]
    want = sys.argv[3] if len(sys.argv) > 3 else "keep"
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            snap = pickle.load(f)
        with open(facts_path) as f:
            marks = json.load(f)["marks"]
    except (OSError, ValueError, KeyError, pickle.UnpicklingError) as e:
        print(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e)}))
        return 1
    base = marks["filename"].replace("\\", "/").split("/")[-1]
    by_line = {line: name for name, line in marks["lines"].items()}

    def marked(frames):
        # The program's frames, matched by its file's name and the marked line.
        return {by_line[fr["line"]] for fr in frames or [] if str(fr.get("filename", "")).split("/")[-1] == base and fr.get("line") in by_line}

    out = {"segments": 0, "blocks": 0, "blocks_with_frames": 0, "trace_entries": 0, "marked": {}, "plots": {}}
    for seg in snap.get("segments", []):
        out["segments"] += 1
        for b in seg.get("blocks", []):
            out["blocks"] += 1
            if b.get("frames"):
                out["blocks_with_frames"] += 1
            for n in marked(b.get("frames")):
                out["marked"][n] = out["marked"].get(n, 0) + 1
    for dev in snap.get("device_traces", []):
        for e in dev:
            out["trace_entries"] += 1
            for n in marked(e.get("frames")):
                out["marked"][n] = out["marked"].get(n, 0) + 1
    try:
        from torch.cuda import _memory_viz

        out["plots"]["segment_plot"] = len(_memory_viz.segment_plot(snap))
        out["plots"]["trace_plot"] = len(_memory_viz.trace_plot(snap))
    except Exception as e:  # said, not raised: the counts above still tell what the file holds
        out["plots"]["error"] = "%s: %s" % (type(e).__name__, e)
    out["ok"] = "error" not in out["plots"] and out["marked"].get(want, 0) > 0
    print(json.dumps(out, sort_keys=True))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
