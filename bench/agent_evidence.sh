#!/usr/bin/env bash
# The agent's evidence from one GPU session, in one command (run on the GPU machine):
#   bash bench/agent_evidence.sh OUT_DIR
# The agent's GPU tests (their scenario reports kept), a snapshot pickle of a normal run with
# memory history on, then the overhead benchmark. Bun comes from .carry when not on PATH.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/reports" "$out/fixtures" "$out/results"
cd "$(dirname "$0")/.."
if ! command -v bun >/dev/null; then
  xz -dc .carry/bun.xz > /tmp/bun && chmod +x /tmp/bun && export PATH=/tmp:$PATH
fi
export PYTHONPATH=$PWD/agent
export PYTHONUNBUFFERED=1
t0=$(date +%s)
{ python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"; g++ --version | head -1; } 2>&1 | tee "$out/machine.txt"
GPUMEM_AGENT_REPORTS=$out/reports GPUMEM_GPU_TESTS=1 bun test test/agent 2>&1 | tee "$out/test-gpu.log" | grep -E "^\(fail\)|pass$|fail$|^Ran|error:" | head -40
echo "tests: $(( $(date +%s) - t0 )) s"
GPUMEM_TUI_DIR=/tmp/gpumem-fixtures python3 test/agent/scenarios.py normal --steps 3 --snapshot "$out/fixtures/normal.pickle" --save "$out/fixtures" > "$out/fixtures/normal-report.json" 2> "$out/fixtures/normal.err" || echo "snapshot run failed: $(tail -3 "$out/fixtures/normal.err")"
ls -la "$out/fixtures"
echo "fixtures: $(( $(date +%s) - t0 )) s"
python3 bench/agent_overhead.py "$out/results" --reps "${REPS:-5}" 2>&1 | tail -12
echo "total: $(( $(date +%s) - t0 )) s"
