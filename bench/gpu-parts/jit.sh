#!/usr/bin/env bash
# Issue 38 on the GPU: what a busy follower's engine compiles, and when, over a long while. A
# transformers GPT-2 (hf_train's size) under `run --json`; following it over the same JIT_S seconds
# (default 150, after 5), each in tmux at 200x60 with JSC's compile report stamped in seconds
# (bench/support/stamp-stderr.sh): the screens on Overview, Process and Tensors, `--json`, and the
# Overview again with JIT_VARIANT's JSC options (default: the tiers' thresholds ten times as high). Each monitor's
# threads every 10 s (COST_WINDOW, bench/monitor-cost.ts), so a compiler that stays busy shows.
#   bash bench/gpu-parts/jit.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
secs=${JIT_S:-150}
variant=${JIT_VARIANT:-BUN_JSC_thresholdForOptimizeAfterWarmUp=10000 BUN_JSC_thresholdForFTLOptimizeAfterWarmUp=640000}
[ -f dist/cli.js ] || bun run build:bundle > "$out/bundle.log" 2>&1
dir=$(mktemp -d /tmp/jit-agents-XXXXXX)
chmod 700 "$dir"
train=(python3 test/gpu/hf_gpt2.py --batch 16 --seq 256 --seconds $((secs + 40)))
GPUMEM_TUI_DIR=$dir timeout -k 5 $((secs + 120)) bun dist/cli.js run --json --interval 1000 --output /tmp/jit-run.ndjson -- "${train[@]}" > "$out/train.log" 2>&1 &
tpid=$!
for _ in $(seq 1 120); do grep -q 'steps/s' "$out/train.log" 2>/dev/null && break; kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
grep -m1 'steps/s' "$out/train.log" || { echo "the training never reached its steps:"; tail -5 "$out/train.log"; }
mon() { # label key env...: the screens (or --json where key is json) of this tree's bundle, compiles stamped
  local label=$1 key=$2; shift 2
  local cmd="env GPUMEM_TUI_DIR=$dir BUN_JSC_reportCompileTimes=true $* bash bench/support/stamp-stderr.sh $out/$label.compiles bun dist/cli.js --interval 1000"
  if [ "$key" = json ]; then echo "$label=$cmd --json > /dev/null"; else echo "$label@$key=$cmd"; fi
}
specs=("$(mon overview 1)" "$(mon process 2)" "$(mon tensors 3)" "$(mon json json)" "$(mon overview-variant 1 "$variant")")
COST_WINDOW=10 timeout -k 5 $((secs + 40)) bun bench/monitor-cost.ts "$out/jit.json" "$secs" 5 "${specs[@]}" > "$out/jit.log" 2>&1
cat "$out/jit.log"
echo "variant: $variant"
# Compiles by 10 s (ms of the compiler's work) and the functions that took the most after 40 s.
for f in "$out"/*.compiles; do python3 bench/support/compile-report.py "$f" 40 10 10; done
grep 'steps/s' "$out/train.log" | tail -1
for _ in $(seq 1 90); do kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
kill "$tpid" 2>/dev/null
wait "$tpid"
echo "run --json exit: $?"
gzip -9 "$out"/*.compiles "$out"/*.compiles.marks
rm -rf "$dir" /tmp/jit-run.ndjson /tmp/jit-run.lines.json
