#!/usr/bin/env bash
# Every agent scenario on the GPU, reports as JSON lines into $1 (default /tmp/agent-reports).
# Used by test/agent/gpu.test.ts and by hand on a GPU machine.
set -u
out=${1:-/tmp/agent-reports}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
export PYTHONPATH=agent${PYTHONPATH:+:$PYTHONPATH}
export GPUMEM_TUI_DIR=${GPUMEM_TUI_DIR:-$out/agents}
for s in normal no-zero-grad kept-loss-graph oom names commands; do
  python3 test/agent/scenarios.py "$s" > "$out/$s.json" 2> "$out/$s.err" || echo "scenario $s failed: $(tail -3 "$out/$s.err")"
done
# pytorch_memlab's API: the line profiler, the reporter, courtesy, the IPython magics.
for s in lines report courtesy magics; do
  python3 test/agent/memlab.py "$s" > "$out/memlab-$s.json" 2> "$out/memlab-$s.err" || echo "memlab $s failed: $(tail -3 "$out/memlab-$s.err")"
done
# What real training holds (FSDP2 DTensors, freed storages, meta, fake, pinned, sparse, quantized,
# wrapper subclasses), named without raising; then the same program without the agent.
python3 test/agent/names_zoo.py > "$out/names-zoo.json" 2> "$out/names-zoo.err" || echo "names_zoo failed: $(tail -3 "$out/names-zoo.err")"
GPUMEM_TUI_DISABLE=1 python3 test/agent/names_zoo.py > "$out/names-zoo-off.json" 2> "$out/names-zoo-off.err" || echo "names_zoo without the agent failed: $(tail -3 "$out/names-zoo-off.err")"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 test/agent/scenarios.py normal > "$out/expandable.json" 2> "$out/expandable.err"
GPUMEM_TUI_INJECT=1 PYTHONPATH=agent/gpumem_agent/_inject:$PYTHONPATH python3 test/agent/scenarios.py normal > "$out/injected.json" 2> "$out/injected.err"
# A compiler that fails: the agent falls back to polling, and says why.
XDG_CACHE_HOME=$out/empty-cache GPUMEM_HOOK_CXX=/bin/false python3 test/agent/scenarios.py normal > "$out/polling.json" 2> "$out/polling.err"
# Four processes at once on an empty cache: one build, every one attached.
for i in 1 2 3 4; do
  XDG_CACHE_HOME=$out/shared-cache python3 test/agent/scenarios.py normal --steps 2 > "$out/many-$i.json" 2> "$out/many-$i.err" &
done
wait
