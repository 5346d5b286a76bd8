#!/usr/bin/env bash
# The monitor attached to a real training run on a GPU, driven in tmux as a user would:
#   bash test/tui/gpu-e2e.sh OUT_DIR
# Starts `gpumem-tui run -- python3 test/tui/train.py`, then Overview, Enter (Process), Tensors,
# Segments, d (dump a snapshot), e + y (empty the cache), q; each screen captured to OUT_DIR.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
s=gpumem-gpu-e2e
cap() { tmux capture-pane -p -t $s > "$out/$1.txt"; }
wait_for() { for _ in $(seq 1 150); do tmux capture-pane -p -t $s | grep -q -- "$1" && return 0; sleep 0.2; done; echo "never saw: $1"; return 1; }
tmux kill-session -t $s 2>/dev/null
tmux new-session -d -s $s -x 140 -y 45 "NO_COLOR=1 bun src/cli.ts run --interval 500 -- python3 test/tui/train.py 40; echo \"exit status \$?\"; sleep 120"
wait_for "ALLOCATED" && sleep 12   # torch import, CUDA, the hook's build or cache, a few steps
cap 1-overview
tmux send-keys -t $s Enter; sleep 1.5; cap 2-process
tmux send-keys -t $s 3; sleep 1; cap 3-tensors
tmux send-keys -t $s 4; sleep 1; cap 4-segments
tmux send-keys -t $s 2 d; wait_for "snapshot:" ; cap 5-dump
tmux send-keys -t $s e; wait_for "y / n"; tmux send-keys -t $s y; wait_for "empty_cache released"; cap 6-empty-cache
tmux send-keys -t $s q; wait_for "exit status"; cap 7-after-quit
ls -la /dev/shm/gpumem-tui-*/ > "$out/agent-dir.txt" 2>&1
