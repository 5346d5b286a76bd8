"""The end of a GPU check script (attach_gpt2.py, attach_ddp.py): its results and checks printed as
JSON, written to --out where given, and the exit status (1 when a check fails or none ran)."""
import json
import sys


def report(results, checks, out=None):
    results["checks"] = checks
    text = json.dumps(results, indent=1)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    sys.exit(0 if checks and all(checks.values()) else 1)
