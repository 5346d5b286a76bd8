#!/usr/bin/env bash
# Issue 38 on the GPU: what each NVML call of a device's sample costs in a warm process (an idle
# monitor's every tick), and libgpumem's whole sample, back to back and at a monitor's pace
# (bench/nvml_steady.c), with no process on the GPU and with one holding 3 GiB that computes now and then.
#   bash bench/gpu-parts/nvml-steady.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
cc -O2 -Icuda bench/nvml_steady.c -o /tmp/nvml_steady -ldl -Lcuda/build -lgpumem -Wl,-rpath,"$PWD/cuda/build" || exit 1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; echo; echo "## No process on the GPU"; echo; } > "$out/nvml-steady.md"
timeout -k 5 60 /tmp/nvml_steady 200 >> "$out/nvml-steady.md" 2>&1
# A process that computes now and then (the process utilization has samples to hand back).
python3 -c 'import torch, time
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda"); a = torch.randn(4096, 4096, device="cuda")
end = time.time() + 70
while time.time() < end: a @ a; torch.cuda.synchronize(); time.sleep(0.05)' &
holder=$!
sleep 8
printf '\n## A process holding 3 GiB, computing now and then\n\n' >> "$out/nvml-steady.md"
timeout -k 5 60 /tmp/nvml_steady 200 >> "$out/nvml-steady.md" 2>&1
# The monitor's own clock for them (src/collect/dear-queries.ts), as `--json` prints it: 12 documents a
# second apart, each process's SM share and the PCIe rate in each.
[ -f dist/cli.js ] || timeout -k 5 60 bun run build:bundle > "$out/bundle.log" 2>&1
timeout -k 5 20 bun dist/cli.js --json --interval 1000 2>/dev/null | head -12 > "$out/json.ndjson"
python3 - "$out/json.ndjson" >> "$out/nvml-steady.md" <<'PY'
import json, sys
print("\n## `--json --interval 1000` beside it: each document's PCIe rates and SM shares\n")
print("| doc | rx B/s | tx B/s | processes (pid: SM%) |\n| --- | --- | --- | --- |")
for i, line in enumerate(open(sys.argv[1])):
    d = json.loads(line)
    dev = d["devices"][0] if d["devices"] else {}
    procs = ", ".join(f'{p["pid"]}: {p["gpu_sm_percent"]}' for p in d["processes"])
    print(f'| {i} | {dev.get("pcie_rx_bytes_per_second")} | {dev.get("pcie_tx_bytes_per_second")} | {procs} |')
PY
cat "$out/nvml-steady.md"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
exit 0
