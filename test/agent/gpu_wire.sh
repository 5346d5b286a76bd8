#!/usr/bin/env bash
# The wire on a GPU: the hook built from gpumem_ring.h against the local torch, its tracker chosen by
# GPUMEM_TUI_HOOK (events, exact, empty: enum gpumem_tracker), phase and step marks from the agent's
# wire.ACTION. One line per run into $1/wire-gpu.txt (default /tmp/wire-gpu); each run bounded.
#   bash test/agent/gpu_wire.sh OUT        (python3 with torch and CUDA on PATH)
set -u
out=${1:-/tmp/wire-gpu}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
export PYTHONPATH=agent${PYTHONPATH:+:$PYTHONPATH}
export XDG_CACHE_HOME=$out/cache
: > "$out/wire-gpu.txt"
for hook in "" exact empty; do
  rm -f "$out/run.json"
  GPUMEM_TUI_DIR=$out/agents-${hook:-events} GPUMEM_TUI_HOOK=$hook timeout 300 python3 test/agent/scenarios.py normal --steps 3 \
    > "$out/run.json" 2> "$out/run-${hook:-events}.err" || echo "tracker ${hook:-events}: scenario failed: $(tail -3 "$out/run-${hook:-events}.err")" >> "$out/wire-gpu.txt"
  python3 - "${hook:-events}" "$out/run.json" >> "$out/wire-gpu.txt" 2>&1 <<'PY' || true
import json, sys
sys.path.insert(0, "agent")
from gpumem_agent import wire
tracker, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit("tracker %s: no report (%s)" % (tracker, type(e).__name__))
h = r.get("header", r)
names = [wire.ACTION_NAMES.get(a, "?%d" % a) for a in h.get("actions", [])]
print("tracker %s: mode=%s hook_error=%s records=%s actions=%s phases=%s syncs=%d totals.allocated=%s" % (
    tracker, h.get("mode"), h.get("hook_error"), h.get("records"), ",".join(names),
    ",".join(sorted(h.get("alloc_bytes_by_phase", {}))), len(h.get("syncs", [])), h.get("totals", {}).get("allocated")))
PY
done
cat "$out/wire-gpu.txt"
