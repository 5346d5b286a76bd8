#!/usr/bin/env bash
# The screens following a real job of one rank per GPU, this tree beside another checkout
# (BASE_TREE) over the same seconds: one torchrun job (test/gpu/hf_gpt2.py --ddp, batches 8,10,12…
# as test/gpu/ranks.sh runs it) started under this tree's `gpumem-tui run --json` (headless: the
# job's launcher, reading the rings as any follower does), and two monitors on the job's agents,
# each in a tmux session of its own at 200×60 on the Overview with no key: this tree's and
# BASE_TREE's. After WARM seconds, WINDOWS windows of 10 s: each monitor's CPU over the same window
# (utime + stime from /proc), so both follow the same records at the same rate, and a ratio between
# them holds where one monitor's figure from one job to the next does not (the ranks' own pace moves).
# On a GPU machine, from the repository root (BASE_TREE with its node_modules and native build):
#   OUT=DIR BASE_TREE=DIR [BUN=bun PY=python3 WARM=20 WINDOWS=4] bash bench/ranks-ab.sh
# Writes DIR/ranks-ab.md (the windows and the totals), DIR/ranks-ab.json, DIR/screens-*.txt.
set -u
: "${OUT:?OUT=DIR}" "${BASE_TREE:?BASE_TREE=DIR}"
BUN=${BUN:-bun}
PY=${PY:-python3}
WARM=${WARM:-20}
WINDOWS=${WINDOWS:-4}
PYBIN=$(dirname "$(command -v "$PY")")
N=$(nvidia-smi -L | wc -l)
W=/tmp/gpumem-ranks-ab
SECONDS_RUN=$((WARM + 10 * WINDOWS + 20))
mkdir -p "$OUT" && rm -rf $W && mkdir -p $W/agents && chmod 700 $W $W/agents
T="tmux -L ranks-ab -f /dev/null"
BATCH=$(seq -s, 8 2 $((8 + 2 * (N - 1))))
# The hook is built once per torch: first, so every rank attaches before its first allocation.
$PY -c "import sys, torch; sys.path.insert(0, 'agent'); from gpumem_agent import build; print(build.hook_library(torch))" > $W/hook.txt 2>&1
export GPUMEM_TUI_DIR=$W/agents PYTHONUNBUFFERED=1 NO_COLOR=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
$BUN src/cli.ts run --json --output $W/run.ndjson -- $PYBIN/torchrun --standalone --nproc_per_node $N --monitor-interval 5 \
  test/gpu/hf_gpt2.py --ddp --seconds $SECONDS_RUN --batch-per-rank $BATCH > $W/run.log 2>&1 &
JOB=$!
for i in $(seq 90); do [ "$(ls $W/agents/*.json 2>/dev/null | wc -l)" -ge "$N" ] && break; sleep 1; done
agents=$(ls $W/agents/*.json 2>/dev/null | wc -l)
# Each monitor exec'd in its pane: the pane's pid is the monitor.
$T new-session -d -s head -x 200 -y 60 "cd $PWD && exec $BUN src/cli.ts"
$T new-session -d -s base -x 200 -y 60 "cd $BASE_TREE && exec $BUN src/cli.ts"
pid() { $T list-panes -t "$1" -F '#{pane_pid}'; }
HEAD_PID=$(pid head)
BASE_PID=$(pid base)
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
sleep "$WARM"
for s in head base; do $T capture-pane -p -t $s | grep -v '⠀⠀⠀⠀' > "$OUT/screens-$s.txt"; done
rows=""
th=0
tb=0
tms=0
for w in $(seq "$WINDOWS"); do
  h0=$(ticks $HEAD_PID); b0=$(ticks $BASE_PID); u0=$(date +%s%N)
  sleep 10
  h1=$(ticks $HEAD_PID); b1=$(ticks $BASE_PID); u1=$(date +%s%N)
  ms=$(( (u1 - u0) / 1000000 ))
  rows="$rows| $w | $ms | $((h1 - h0)) | $((b1 - b0)) |
"
  th=$((th + h1 - h0)); tb=$((tb + b1 - b0)); tms=$((tms + ms))
done
for s in head base; do $T capture-pane -p -t $s | grep -v '⠀⠀⠀⠀' >> "$OUT/screens-$s.txt"; done
for s in head base; do $T send-keys -t $s q; done
sleep 2
$T kill-server 2>/dev/null
wait $JOB
job_rc=$?
HZ=$(getconf CLK_TCK)
pct() { $PY -c "print(round($1 * 100 / $HZ / ($2 / 1000), 2))"; }
head_pct=$(pct $th $tms)
base_pct=$(pct $tb $tms)
ratio=$($PY -c "print(round($tb / max($th, 1), 2))")
{
  echo "# The screens following $N real ranks, this tree beside BASE_TREE over the same seconds (bench/ranks-ab.sh)"
  echo
  echo "$N ranks of test/gpu/hf_gpt2.py --ddp (batches $BATCH) under \`gpumem-tui run --json\` (job exit $job_rc), $agents agents; both monitors at 200×60 on the Overview, no key; windows of 10 s after $WARM s; CPU ticks of $((1000 / HZ)) ms."
  echo
  echo "| window | ms | this tree (ticks) | BASE_TREE (ticks) |"
  echo "| --- | ---: | ---: | ---: |"
  printf "%s" "$rows"
  echo
  echo "this tree: **$head_pct%** of a core; BASE_TREE: **$base_pct%**; BASE_TREE / this tree: $ratio"
} > "$OUT/ranks-ab.md"
echo "{\"ranks\": $N, \"agents\": $agents, \"job_exit\": $job_rc, \"windows\": $WINDOWS, \"ms\": $tms, \"head_ticks\": $th, \"base_ticks\": $tb, \"head_percent_of_a_core\": $head_pct, \"base_percent_of_a_core\": $base_pct, \"base_over_head\": $ratio}" > "$OUT/ranks-ab.json"
cat "$OUT/ranks-ab.md"
