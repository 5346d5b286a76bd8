#!/usr/bin/env bash
# A torchrun job of one rank per GPU under `gpumem-tui run`, watched as a user would (tmux at 200×60,
# then 80×24), a rank killed mid-run, the monitor's own CPU and memory (steady, then with keys), and `--json --once` beside
# `nvidia-smi --query-gpu`. On a GPU machine, from the repository root:
#   OUT=DIR BUN=bun PY=python3 bash test/gpu/ranks.sh [SECONDS]
# MON_PROF=DIR: the monitor runs under Bun's sampling profiler (--cpu-prof, written to DIR when it quits).
# Writes DIR/screens.txt, DIR/docs.ndjson (`--json --once` before and after the kill), DIR/facts.tar.xz
# (torch's own figures per rank and step), DIR/monitor.txt, DIR/nvml.md; then
# python3 test/gpu/ranks_check.py DIR writes DIR/ranks.md and DIR/ranks.json (the checks).
set -u
SECONDS_RUN=${1:-60}
BUN=${BUN:-bun}
PY=${PY:-python3}
PYBIN=$(dirname "$(command -v "$PY")")
N=$(nvidia-smi -L | wc -l)
W=/tmp/gpumem-ranks
mkdir -p "$OUT" && rm -rf $W && mkdir -p $W/agents && chmod 700 $W $W/agents
T="tmux -L ranks -f /dev/null"
BATCH=$(seq -s, 8 2 $((8 + 2 * (N - 1))))   # 8,10,12…: the last rank peaks above the others
# The hook is built once per torch (the first process to attach builds it, while the program runs
# on): build it first, so every rank attaches before its first allocation.
$PY -c "import sys, torch; sys.path.insert(0, 'agent'); from gpumem_agent import build; print(build.hook_library(torch))" > $W/hook.txt 2>&1
export GPUMEM_TUI_DIR=$W/agents PYTHONUNBUFFERED=1 NO_COLOR=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
PROF=${MON_PROF:+--cpu-prof --cpu-prof-md --cpu-prof-dir=$MON_PROF}
$T new-session -d -s r -x 200 -y 60 "cd $PWD; $BUN $PROF src/cli.ts run -- $PYBIN/torchrun --standalone --nproc_per_node $N --monitor-interval 5 test/gpu/hf_gpt2.py --ddp --seconds $SECONDS_RUN --batch-per-rank $BATCH --facts $W/f.jsonl 2> $W/monitor.err; echo exit status \$?; sleep 600"
# A monitor watching from the start, as the screens do (a `--json --once` that comes later meets rings
# that lapped since: its detail is partial, honestly): its documents for the step totals.
(timeout $((SECONDS_RUN + 90)) $BUN src/cli.ts --json --interval 1000 > $W/stream.ndjson 2>/dev/null &)
cap() { echo "===== $1 $(date +%T) ($($T display -p -t r '#{window_width}x#{window_height}'))" >> $OUT/screens.txt; $T capture-pane -p -t r | grep -v '^\s*$' | grep -v '⠀⠀⠀⠀' >> $OUT/screens.txt; }
once() { echo "{\"label\": \"$1\", \"doc\": $(timeout 20 $BUN src/cli.ts --json --once)}" >> $OUT/docs.ndjson; }
# Wait for every rank's agent (model build and NCCL take a while), then watch.
for i in $(seq 60); do [ "$(ls $W/agents/*.json 2>/dev/null | wc -l)" -ge "$N" ] && break; sleep 1; done
sleep 15; cap overview-200x60
MON=$(for p in $(pgrep -x bun); do grep -qa "cli.ts.run" /proc/$p/cmdline && echo $p; done | head -1)
# The screens following the job, no key pressed (the Overview at the default interval): 10 s.
s0=$(awk '{print $14+$15}' /proc/$MON/stat); u0=$(date +%s%N); sleep 10
s1=$(awk '{print $14+$15}' /proc/$MON/stat); u1=$(date +%s%N)
echo "steady: monitor pid $MON: $((s1 - s0)) ticks of CPU over $(( (u1 - u0) / 1000000 )) ms on the Overview, no key, agents $N" >> $OUT/monitor.txt
a=$(awk '{print $14+$15}' /proc/$MON/stat); t0=$(date +%s%N)
once running
echo "{\"label\": \"stream-running\", \"doc\": $(tail -n 1 $W/stream.ndjson)}" >> $OUT/docs.ndjson
$T send-keys -t r Enter; sleep 2; cap process-first-rank
$T send-keys -t r 3; sleep 2; cap tensors-first-rank
$T send-keys -t r 1; sleep 1
$T resize-window -t r -x 80 -y 24; sleep 2; cap overview-80x24
$T resize-window -t r -x 200 -y 60; sleep 5
b=$(awk '{print $14+$15}' /proc/$MON/stat); t1=$(date +%s%N)
echo "monitor pid $MON: $((b - a)) ticks of CPU over $(( (t1 - t0) / 1000000 )) ms (CLK_TCK $(getconf CLK_TCK)), agents $N; $(grep VmHWM /proc/$MON/status)" >> $OUT/monitor.txt
# Kill the last rank (SIGKILL, as the OOM killer would): torchrun tears the job down after its
# monitor interval (5 s); until then the job runs with a rank gone.
VICTIM=$($PY -c "import json,glob; print([m['pid'] for m in map(lambda f: json.load(open(f)), glob.glob('$W/agents/*.json')) if m.get('rank') == $N - 1][0])")
echo "killed rank $((N - 1)) pid $VICTIM at $(date +%T)" >> $OUT/monitor.txt
kill -9 $VICTIM; sleep 1.5; cap after-kill; once after-kill
sleep 20; cap end
$T capture-pane -p -S -400 -t r | grep -v '⠀⠀⠀⠀' | tail -40 > $W/scroll.txt; cat $W/scroll.txt >> $OUT/screens.txt
cat $W/monitor.err >> $OUT/monitor.txt 2>/dev/null
# q quits the monitor (its profile is written then); the job ended after the kill.
$T send-keys -t r q; sleep 3
$T kill-server
(cd $W && tar cJf $OUT/facts.tar.xz f.jsonl.rank* hook.txt 2>/dev/null)
timeout 120 $BUN bench/nvml.ts $W/nvml > /dev/null 2>&1; cp $W/nvml/nvml.md $OUT/nvml.md 2>/dev/null
$PY test/gpu/ranks_check.py $OUT
