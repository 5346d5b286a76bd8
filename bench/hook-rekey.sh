#!/usr/bin/env bash
# The hook's cache key after a change to what it is built from: a hook built by an earlier tree is
# rebuilt once by this one, then reused. Each tree runs the same short CUDA program under its own
# `gpumem-tui run --json`, one cache shared by all the runs:
#   bash bench/hook-rekey.sh BASE_TREE OUT_DIR      (BASE_TREE: the earlier tree, its node_modules beside)
# Prints, after each run, the hooks in the cache and whether that run built one.
set -u
base=${1:?BASE_TREE}
out=${2:?OUT_DIR}
mkdir -p "$out"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
prog='import torch
x = torch.ones(1 << 20, device="cuda")
y = (x * 2).sum().item()
print("result", y, "allocated", torch.cuda.memory_allocated())'
n=0
for tree in "$base" "$PWD" "$PWD"; do
  n=$((n + 1))
  label=head; [ "$tree" = "$PWD" ] || label=base
  before=$(ls "$cache/gpumem-tui"/hook-*.so 2>/dev/null | wc -l)
  (cd "$tree" && XDG_CACHE_HOME=$cache timeout 120 bun src/cli.ts run --json --output "$out/run$n-$label.ndjson" -- python3 -c "$prog") > "$out/run$n-$label.log" 2>&1
  rc=$?
  after=$(ls "$cache/gpumem-tui"/hook-*.so 2>/dev/null | wc -l)
  built=no; [ "$after" -gt "$before" ] && built=yes
  # What the program printed, and whether the hook (not the polling fallback) watched it.
  echo "run $n ($label tree): exit $rc, hooks in the cache $before -> $after (built: $built); program: $(grep -m1 '^result' "$out/run$n-$label.log")"
  tail -n 1 "$out/run$n-$label.ndjson" 2>/dev/null | python3 -c 'import json,sys
d = json.loads(sys.stdin.read() or "{}")
for p in d.get("processes", []):
    pt = p.get("pytorch") or {}
    print("  final document: hook_mode", pt.get("hook_mode"), "allocated_bytes", pt.get("allocated_bytes"), "notes", json.dumps(pt.get("notes"))[:300])' 2>/dev/null
done
ls -la "$cache/gpumem-tui" > "$out/cache.txt"
