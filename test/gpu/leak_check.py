"""What a script reads of a leak under `run --json`, against torch's own figures.

    gpumem-tui run --json --output RUN.ndjson -- python3 test/gpu/hf_gpt2.py --leak --seconds 30 --facts FACTS.jsonl
    python3 test/gpu/leak_check.py RUN.ndjson FACTS.jsonl [OUT.json]

Checks the last document (the program's whole run): a growth finding whose growth per step is within
1% of torch's (memory_allocated after the optimizer step, first to last step) and whose requested
bytes' growth per step is torch's (requested_bytes, to the byte), its category, where
it was allocated (phase and range), the program's exit status, and no warning that should not be
there. Prints the result as JSON; exit status 1 when a check fails.
"""
import json
import sys

docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
facts = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
steps = [f for f in facts if "step" in f and "memory_allocated" in f and not f.get("final") and "oom" not in f]
last = docs[-1]
procs = [p for p in last.get("processes", []) if (p.get("pytorch") or {}).get("profile")]
prof = procs[0]["pytorch"]["profile"] if procs else {}
fs = prof.get("findings", [])
growth = next((f for f in fs if f["id"] == "growth"), None)
# torch's growth per step over the steady state (skip the first steps: AdamW's state appears at step 1)
a, b = steps[len(steps) // 10], steps[-1]
true = (b["memory_allocated"] - a["memory_allocated"]) / (b["step"] - a["step"])
true_requested = (b["requested_bytes"] - a["requested_bytes"]) / (b["step"] - a["step"])
named = growth["numbers"]["growth_per_step_bytes"] if growth else None
named_requested = growth["numbers"].get("requested_growth_per_step_bytes") if growth else None
off = abs(named - true) / true if named else None
checks = {
    "growth finding in the last document": growth is not None,
    "growth per step within 1% of torch's": off is not None and off <= 0.01,
    "requested bytes' growth per step equal to torch's": named_requested is not None and abs(named_requested - true_requested) <= 1,
    "its category named": bool(growth and growth["numbers"].get("category")) and "The growth is in" in growth["evidence"],
    "where it was allocated named": bool(growth and growth["numbers"].get("site_phase")) and "were allocated" in growth["evidence"],
    "the program's exit status": (last.get("program") or {}).get("exit_status") == 0,
    "no other warning": [f["id"] for f in fs if f["severity"] == "warning" and f["id"] != "growth"] == [],
    "detail not partial": not (prof.get("detail") or {}).get("partial", True),
}
out = {
    "checks": checks,
    "torch_growth_per_step_bytes": round(true),
    "named_growth_per_step_bytes": named,
    "torch_requested_growth_per_step_bytes": round(true_requested),
    "named_requested_growth_per_step_bytes": named_requested,
    "relative_difference": off,
    "finding": growth,
    "other_findings": [(f["id"], f["severity"], f["title"]) for f in fs if f["id"] != "growth"],
    "detail": prof.get("detail"),
    "program": last.get("program"),
    "documents": len(docs),
    "steps": len(steps),
}
text = json.dumps(out, indent=1)
print(text)
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(text + "\n")
sys.exit(0 if all(checks.values()) else 1)
