#!/usr/bin/env bash
# `gpumem-tui --json --once` against `nvidia-smi --query-gpu`, on the GPU machine, in one command
# (each part bounded; a part that fails leaves the next to run; five files in OUT_DIR):
#   bash bench/start-gpu.sh OUT_DIR                 (about 2 minutes)
# 1. libgpumem and the bundle (dist/cli.js, the package's bin) built
# 2. bench/nvml.ts: the bundle, the sources and nvidia-smi interleaved, medians and their ratio
#    (nvml.md, nvml.json)
# 3. bench/startup.ts three times: where the time of one run goes, step by step (startup.txt)
# 4. bench/nvml_first_calls.c, nvmlInit_v2 against nvmlInitWithFlags(NO_ATTACH), 6 pairs
#    (first_calls.txt)
# 5. the GPU tests of the warm-up, NVML and the bundle (their lines in start-gpu.log)
# The last lines printed: the ratio, the step-by-step lines of the three runs, the init pairs, the
# GPU tests' pass and fail counts.
# Needs bun on PATH (see bench/gpu-next.sh's header for carrying it), nvidia-smi, python3 with torch
# (bench/nvml.ts holds 3 GiB on the GPU with it during the run), a C compiler.
set -u
out=${1:?usage: bash bench/start-gpu.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
log=$out/start-gpu.log
. bench/step.sh
step build-native 120 bun cuda/build.ts
step build-bundle 120 bun run build:bundle
step nvml 300 bun bench/nvml.ts "$out"
for i in 1 2 3; do
  echo "== startup run $i" >> "$out/startup.txt"
  timeout 60 bun bench/startup.ts >> "$out/startup.txt" 2>&1 || echo "startup run $i: exit status $?" | tee -a "$out/startup.txt"
done
# NVML's start without attaching the GPUs at init (nvmlInitWithFlags NO_ATTACH): shorter in all?
if timeout 60 cc -O2 bench/nvml_first_calls.c -o "$out/nvml_first_calls" -ldl -lpthread >> "$log" 2>&1; then
  for i in 1 2 3 4 5 6; do
    for mode in serial noattach; do timeout 20 "$out/nvml_first_calls" $mode >> "$out/first_calls.txt" 2>&1 || echo "$mode: exit status $?" >> "$out/first_calls.txt"; done
  done
  rm -f "$out/nvml_first_calls"
else
  echo "bench/nvml_first_calls.c did not build (see $log)" >> "$out/first_calls.txt"
fi
grep -h "^| .*json --once\|^| .*nvidia-smi --query\|^| ratio" "$out/nvml.md" 2>/dev/null
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
k = ("ratio_smi_over_ours", "json_once_median_ms", "json_once_source_median_ms", "nvidia_smi_median_ms")
print("ratio nvidia-smi / gpumem-tui --json --once (bundle): %sx  (bundle %s ms, sources %s ms, nvidia-smi %s ms; above 1: faster than nvidia-smi)" % tuple(r[x] for x in k))
' "$out/nvml.json" 2>/dev/null || echo "no ratio: bench/nvml.ts did not finish (see $log)"
grep -h "total\|load libgpumem\|wait for\|session.tick\|document holds\|no device" "$out/startup.txt"
cat "$out/first_calls.txt" 2>/dev/null
# The warm-up's kept sample and its first part, on the GPU (after the timings, not to disturb them).
step gpu-tests 180 env GPUMEM_GPU_TESTS=1 bun test test/ffi/warm-up.test.ts test/ffi/nvml.test.ts test/bundle.test.ts
grep -h "^(fail)\|^ *[0-9]* \(pass\|fail\)$" "$log"
