#!/usr/bin/env bash
# What is left to prove on a GPU, in one command, each part bounded in time so one that hangs does
# not take the session with it:
#   bash bench/gpu-next.sh OUT_DIR
# 1. every GPU test (bun run test:gpu): the agent's scenarios, the line profiler, report(),
#    courtesy(), %%gpumem, a monitor-written snapshot opened by torch.cuda._memory_viz, NVML;
# 2. --json --once against nvidia-smi again (NVML now starts on a thread while Bun loads), and
#    where its time goes (bench/startup.ts);
# 3. the line profiler's overhead beside memlab's per-line memory_stats;
# 4. the end-to-end run (bun run e2e:gpu): TUI on a real training run, d, e, kill -9, OOM;
# 5. the TUI on a real training run in tmux, screens captured (test/tui/gpu-e2e.sh);
# 6. the agent's overhead again, now with torch.profiler and a GPU-bound convnet step.
#
# On the device (bun and tmux travel in .carry, ignored by git; carry [".carry"]):
#   xz -dc .carry/bun.xz > /tmp/bun && chmod +x /tmp/bun && export PATH=/tmp:$PATH &&
#   tar -xJf .carry/node_modules.tar.xz && bash bench/gpu-next.sh $OUT
# (.carry/tmux holds a tmux binary with its libraries; this script puts it on PATH where tmux is missing.)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/results"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD/agent
if ! command -v tmux >/dev/null 2>&1 && [ -x .carry/tmux/tmux ]; then
  mkdir -p /tmp/tb
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$PWD/.carry/tmux" "$PWD/.carry/tmux/tmux" > /tmp/tb/tmux
  chmod +x /tmp/tb/tmux
  export PATH=/tmp/tb:$PATH
fi
command -v bun >/dev/null 2>&1 || { echo "no bun on PATH (see the header)"; exit 2; }
[ -d node_modules ] || bun install --offline >/dev/null 2>&1 || echo "node_modules missing: tar -xJf .carry/node_modules.tar.xz"
bun cuda/build.ts >/dev/null 2>&1 || echo "libgpumem did not build"
step() { echo "== $1"; shift; timeout "$@"; echo "== exit $?"; }
step "test:gpu" 420 env GPUMEM_GPU_TESTS=1 GPUMEM_AGENT_REPORTS="$out/agent-reports" bun test > "$out/test-gpu.log" 2>&1
tail -30 "$out/test-gpu.log"
step "nvml" 120 bun bench/nvml.ts "$out/results" > "$out/nvml.log" 2>&1
head -14 "$out/results/nvml.md" 2>/dev/null
for i in 1 2 3; do bun bench/startup.ts; done > "$out/results/startup.txt" 2>&1; tail -10 "$out/results/startup.txt"
step "line profiler" 180 python3 bench/line_profiler.py "$out/results" > "$out/line_profiler.log" 2>&1
cat "$out/results/line_profiler.md" 2>/dev/null
step "e2e:gpu" 420 bun bench/e2e-gpu.ts "$out/e2e" > "$out/e2e.log" 2>&1
tail -20 "$out/e2e/REPORT.md" 2>/dev/null
step "tui gpu-e2e" 240 bash test/tui/gpu-e2e.sh "$out/tui" > "$out/tui.log" 2>&1
ls "$out/tui" 2>/dev/null
step "agent overhead" 500 python3 bench/agent_overhead.py "$out/results" --reps "${REPS:-4}" --cpus 2,3 > "$out/agent_overhead.log" 2>&1
sed -n 1,20p "$out/results/agent_overhead.md" 2>/dev/null
