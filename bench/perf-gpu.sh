#!/usr/bin/env bash
# The performance evidence that needs the GPU machine, in one command (each part bounded; a part
# that fails leaves the next to run; everything lands in OUT_DIR, seven files at most):
#   bash bench/perf-gpu.sh OUT_DIR [start|overhead|all]      (default all; about 1.5 + 7 minutes)
# start:    the hook's own cost per event (bench/hook_cost.py) and `--json --once` against
#           nvidia-smi (bench/nvml.ts: the bundle, the sources, the bundle with no NVML constants kept)
# overhead: the agent against PyTorch's recorders on a transformers GPT-2 (bench/agent_overhead_gpt2.py)
# Needs bun on PATH (see bench/gpu-next.sh's header for carrying it), python3 with torch and
# transformers, a C and a C++ compiler.
set -u
out=${1:?usage: bash bench/perf-gpu.sh OUT_DIR [start|overhead|all]}
what=${2:-all}
mkdir -p "$out"
cd "$(dirname "$0")/.."
log=$out/perf-gpu.log
. bench/step.sh
bun cuda/build.ts >> "$log" 2>&1 || echo "libgpumem did not build (see $log)"
if [ "$what" = start ] || [ "$what" = all ]; then
  step hook_cost 240 python3 bench/hook_cost.py "$out" --runs 300 --events 100000
  step nvml 240 bun bench/nvml.ts "$out"
fi
if [ "$what" = overhead ] || [ "$what" = all ]; then
  step agent_overhead_gpt2 570 python3 bench/agent_overhead_gpt2.py "$out" --reps 8
fi
grep -h -A 14 "^| action" "$out/hook_cost.md" 2>/dev/null
grep -h "json --once\|nvidia-smi --query\|ratio" "$out/nvml.md" 2>/dev/null | head -8
sed -n '/^## Targets/,$p' "$out/agent_overhead_gpt2.md" 2>/dev/null
