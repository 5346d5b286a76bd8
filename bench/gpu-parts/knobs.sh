#!/usr/bin/env bash
# Issue 38 on the GPU: what the engine's and the allocator's own settings do to a busy follower's CPU
# over a long while (its whole cost, not one window of it). A transformers GPT-2 (hf_train's size)
# under `run --json`; following it over the same KNOB_S seconds (default 100) after KNOB_WARM (40),
# each in tmux at 200x60 on the Overview, this tree's bundle: twice as it starts, and once with each
# of KNOBS' settings ("label=VAR=value VAR=value;…", environment variables Bun reads at its start:
# JavaScriptCore's BUN_JSC_* options, mimalloc's MIMALLOC_*), and `--json` as it starts and with the
# first setting. Each monitor's threads every 20 s (COST_WINDOW, bench/monitor-cost.ts).
#   bash bench/gpu-parts/knobs.sh OUT_DIR      (repo root, after `bun cuda/build.ts --install`)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
secs=${KNOB_S:-100}
warm=${KNOB_WARM:-40}
knobs=${KNOBS:-nocgc=BUN_JSC_useConcurrentGC=0;markers1=BUN_JSC_numberOfGCMarkers=1;ftl10=BUN_JSC_thresholdForFTLOptimizeAfterWarmUp=640000;noftl=BUN_JSC_useFTLJIT=0;purge1s=MIMALLOC_PURGE_DELAY=1000}
[ -f dist/cli.js ] || bun run build:bundle > "$out/bundle.log" 2>&1
dir=$(mktemp -d /tmp/knob-agents-XXXXXX)
chmod 700 "$dir"
train=(python3 test/gpu/hf_gpt2.py --batch 16 --seq 256 --seconds $((secs + warm + 30)))
GPUMEM_TUI_DIR=$dir timeout -k 5 $((secs + warm + 120)) bun dist/cli.js run --json --interval 1000 --output /tmp/knob-run.ndjson -- "${train[@]}" > "$out/train.log" 2>&1 &
tpid=$!
for _ in $(seq 1 120); do grep -q 'steps/s' "$out/train.log" 2>/dev/null && break; kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
grep -m1 'steps/s' "$out/train.log" || { echo "the training never reached its steps:"; tail -5 "$out/train.log"; }
specs=("default-a@1=env GPUMEM_TUI_DIR=$dir bun $PWD/dist/cli.js --interval 1000" "default-b@1=env GPUMEM_TUI_DIR=$dir bun $PWD/dist/cli.js --interval 1000")
IFS=';' read -ra list <<< "$knobs"
for k in "${list[@]}"; do
  [ -n "$k" ] || continue
  specs+=("${k%%=*}@1=env GPUMEM_TUI_DIR=$dir ${k#*=} bun $PWD/dist/cli.js --interval 1000")
done
specs+=("json=env GPUMEM_TUI_DIR=$dir bun $PWD/dist/cli.js --json --interval 1000 > /dev/null")
first=${list[0]}
specs+=("json-${first%%=*}=env GPUMEM_TUI_DIR=$dir ${first#*=} bun $PWD/dist/cli.js --json --interval 1000 > /dev/null")
COST_WINDOW=20 timeout -k 5 $((secs + warm + 40)) bun bench/monitor-cost.ts "$out/knobs.json" "$secs" "$warm" "${specs[@]}" > "$out/knobs.log" 2>&1
cat "$out/knobs.log"
echo "settings: $knobs"
bun -e "for (const r of require('$out/knobs.json').runs) console.log(r.label.padEnd(14), String(r.cpu_percent_of_a_core).padStart(5), '%', r.max_rss_mib, 'MiB', JSON.stringify(r.threads))"
grep 'steps/s' "$out/train.log" | tail -1
for _ in $(seq 1 60); do kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
kill "$tpid" 2>/dev/null
wait "$tpid"
echo "run --json exit: $?"
rm -rf "$dir" /tmp/knob-run.ndjson /tmp/knob-run.lines.json
