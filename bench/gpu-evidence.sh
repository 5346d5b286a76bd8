#!/usr/bin/env bash
# One GPU session's evidence, in one command (how bench/results and test/fixtures were made):
#   bash bench/gpu-evidence.sh OUT_DIR
# GPU tests, fixtures recorded from real training runs, the agent's overhead, NVML against
# nvidia-smi, and a JSON document of the machine while a PyTorch process with the agent runs.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/fixtures" "$out/results"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/agent
set -o pipefail
GPUMEM_GPU_TESTS=1 bun test 2>&1 | tee "$out/test-gpu.log" | tail -40
for s in "normal --steps 20" "no-zero-grad --steps 12" "kept-loss-graph --steps 12" "oom"; do
  GPUMEM_TUI_DIR=/tmp/gpumem-fixtures python3 test/agent/scenarios.py $s --save "$out/fixtures" > /dev/null 2> "$out/fixtures/${s%% *}.err" || echo "fixture $s failed"
done
python3 bench/agent_overhead.py "$out/results" --reps "${REPS:-3}" 2>&1 | tail -12
bun bench/nvml.ts "$out/results" 2>&1 | head -14
# The machine as a script sees it, with a training process that has the agent.
GPUMEM_TUI_DIR=/tmp/gpumem-doc python3 - <<'PY' &
import time, torch, gpumem_agent
gpumem_agent.attach()
m = torch.nn.Linear(4096, 4096).cuda(); opt = torch.optim.AdamW(m.parameters())
x = torch.randn(256, 4096, device="cuda")
end = time.time() + 8
while time.time() < end:
    m(x).sum().backward(); opt.step(); opt.zero_grad()
PY
sleep 5
GPUMEM_TUI_DIR=/tmp/gpumem-doc bun src/cli.ts --json --once > "$out/results/h100-training.json"
wait
