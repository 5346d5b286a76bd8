#!/usr/bin/env bash
# Issue 38 on the GPU: what each NVML call of a device's sample costs in a warm process (an idle
# monitor's every tick), and libgpumem's whole sample, back to back and at a monitor's pace
# (bench/nvml_steady.c; a process holding 3 GiB on the GPU, so the process queries have one to list).
#   bash bench/gpu-parts/nvml-steady.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
cc -O2 -Icuda bench/nvml_steady.c -o /tmp/nvml_steady -ldl -Lcuda/build -lgpumem -Wl,-rpath,"$PWD/cuda/build" || exit 1
python3 -c 'import torch, time; x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda"); time.sleep(60)' &
holder=$!
sleep 8
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; } > "$out/nvml-steady.md"
timeout -k 5 60 /tmp/nvml_steady 200 >> "$out/nvml-steady.md" 2>&1
cat "$out/nvml-steady.md"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
exit 0
