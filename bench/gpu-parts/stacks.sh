#!/usr/bin/env bash
# Issue 37's GPU evidence (which line, on by default), on one GPU in at most 5.5 minutes (the compiled model compiles from cold):
#   bash bench/gpu-parts/stacks.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
#   parts/          bench/agent_parts.py --parts null,stacks on the launch-bound and GPU-bound GPT-2 steps:
#                   the hook's Python stacks as shipped (1 MiB threshold, smaller allocations sampled by
#                   bytes) switched off and on inside one process in paired blocks, beside an A/A row
#                   (null): the figures that decide whether stacks stay on by default (<= 1% on both)
#   parts-more/     the same on ResNet50 and a torch.compile'd GPT-2, while time is left
#   hook_cost/      the hook's own cost per event, stacks off and on (the countdown below the threshold)
#   pystack_cost/   one walk's cost, and a stream's per allocation at several sampling rates (CPU)
#   tests.log       the stacks' tests on this machine's CPython (the walker, the sampled bytes per line)
#   machine.txt, summary.txt
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
# Nothing set: the stacks as shipped (on, 1 MiB, sampled at 512 KiB).
unset GPUMEM_TUI_STACKS GPUMEM_TUI_LIBRARY GPUMEM_TUI_USER_CODE
deadline=$((SECONDS + ${STACKS_BUDGET:-330}))
left() { local l=$((deadline - SECONDS)); [ "$l" -lt "$1" ] || l=$1; echo "$l"; }
step() { # name seconds command...
  local name=$1 t; t=$(left "$2"); shift 2
  # STACKS_ONLY=a,b: those steps alone (a later session's missing figures), the others skipped
  case ",${STACKS_ONLY:-$name}," in *",$name,"*) ;; *) return ;; esac
  if [ "$t" -lt 10 ]; then echo "== $name: skipped (the 4 minutes are spent)" | tee -a "$out/summary.txt"; return; fi
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" > "$out/$name.log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s (limit $t s)" | tee -a "$out/summary.txt"
  grep -E 'Stacks cost|Stacks as shipped|Stacks: off|^  (launch_bound|gpu_bound|resnet50|compiled) |^\(fail\)|^ *[0-9]+ (pass|fail)|Error|error:' "$out/$name.log" | tail -n 12 | tee -a "$out/summary.txt"
}
: > "$out/summary.txt"
{ nvidia-smi -L; python3 -c 'import torch, transformers, torchvision, sys; print(sys.version.split()[0], torch.__version__, transformers.__version__, torchvision.__version__)'; git log -1 --format=%h; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
# What decides the default first (its first child also builds the hook, if no part did before).
step parts 160 python3 bench/agent_parts.py "$out/parts" --quick --parts null,stacks --workloads launch_bound,gpu_bound \
  --rounds-launch 40 --rounds-gpu 30 --block-ms 100 --timeout 120
step tests 60 env GPUMEM_GPU_TESTS=1 bun test test/agent/stacks.test.ts test/headless/run-stacks.test.ts
step pystack-cost 20 python3 bench/pystack_cost.py "$out/pystack_cost" --runs 10
step parts-more 80 python3 bench/agent_parts.py "$out/parts-more" --quick --parts null,stacks --workloads resnet50 \
  --rounds-launch 16 --rounds-gpu 16 --block-ms 100 --timeout 70
# The compiled model apart: inductor compiles it from cold first (over 60 s on an H200 with torch 2.11),
# which left it no time inside resnet50's limit on 2026-11-29.
step parts-compiled 170 python3 bench/agent_parts.py "$out/parts-compiled" --quick --parts null,stacks --workloads compiled \
  --rounds-launch 16 --block-ms 100 --timeout 160
step hook-cost 60 python3 bench/hook_cost.py "$out/hook_cost" --runs 60 --events 100000
for f in parts/agent_parts.md parts-more/agent_parts.md parts-compiled/agent_parts.md; do
  [ -f "$out/$f" ] && { echo "--- $f"; grep -E '^## |^\| (null|stacks) |Stacks' "$out/$f"; } | tee -a "$out/summary.txt"
done
[ -f "$out/hook_cost/hook_cost.md" ] && grep -E '^\| (alloc|mixed)' "$out/hook_cost/hook_cost.md" | tee -a "$out/summary.txt"
du -sh "$out" | tee -a "$out/summary.txt"
