#!/usr/bin/env bash
# The ring's lanes on a GPU host, each part bounded in time (one that fails or hangs does not stop
# the next):
#   bash bench/lanes-gpu.sh OUT_DIR
# 1. the hook's own cost per event, a device's own lane and the shared lane (bench/hook_cost.py);
# 2. a real torch program on cuda:0 with the agent attached, ~2000 allocator events: its live ring
#    (two lanes) and its compact copy read by the monitor's reader must count what torch counted,
#    and the model replaying it must end on torch's memory_allocated (bench/lanes-check.ts);
# 3. where two GPUs are visible: the same with cuda:0 and cuda:1 churned at once by two threads
#    (two device lanes written together, range marks on the shared lane meanwhile).
# Needs python3 with torch first on PATH (e.g. PATH=/opt/torch/.venv/bin:$PATH) and bun (on PATH,
# or /tmp/bun). OUT_DIR gets five files: summary.txt (every part's exit, logs' tails, results),
# hook_cost.json and .md, lanes-1.check.json and lanes-2.check.json; the rest stays in a work dir.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/lanes-gpu.XXXXXX)
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/agent
command -v bun >/dev/null 2>&1 || { [ -x /tmp/bun ] && export PATH=/tmp:$PATH; }
sum="$out/summary.txt"
: > "$sum"
step() { local name=$1; shift; echo "== $name" | tee -a "$sum"; timeout "$@"; local rc=$?; echo "== $name: exit $rc" | tee -a "$sum"; }
{ python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "devices", torch.cuda.device_count())'; } >> "$sum" 2>&1
command -v bun >/dev/null 2>&1 && (bun cuda/build.ts >> "$sum" 2>&1 || echo "libgpumem did not build" >> "$sum")

# 1. The hook's cost: look for "lane: device" rows at or under 10 ns added, "shared" beside them.
step "hook_cost" 300 python3 bench/hook_cost.py "$out" --runs 300 --events 100000 --cpu 2 > "$work/hook_cost.log" 2>&1
tail -5 "$work/hook_cost.log" >> "$sum"
grep -E '^\| (mixed|alloc|free_requested)|Target' "$out/hook_cost.md" >> "$sum" 2>/dev/null

# 2 and 3. One device, then two where there are two.
n=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
for d in 1 2; do
  if [ "$n" -lt "$d" ]; then echo "== lanes-$d: skipped, $n GPU(s) visible" | tee -a "$sum"; continue; fi
  step "lanes-$d run" 180 env GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR="$work/agents-$d" python3 bench/lanes_run.py "$work" --devices "$d" --events 2000 > "$work/lanes-$d.log" 2>&1
  tail -3 "$work/lanes-$d.log" >> "$sum"
  step "lanes-$d check" 120 bun bench/lanes-check.ts "$work/lanes-$d.facts.json" > "$out/lanes-$d.check.json" 2>&1
  cat "$out/lanes-$d.check.json" >> "$sum"
done
rm -rf "$work"
cat "$sum"
