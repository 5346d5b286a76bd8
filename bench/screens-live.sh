#!/usr/bin/env bash
# What a user reads: a transformers GPT-2 that keeps a bit of every step's logits, trained at full
# speed for a minute under `gpumem-tui run` in a real terminal (tmux), the screens captured as the
# user would see them at 200x60 and then 80x24, beside torch's own figures after every step:
#   bash bench/screens-live.sh OUT_DIR [SECONDS]
# OUT_DIR gets screens.txt (each capture, titled with its size, screen and second) and facts.jsonl.
set -u
out=${1:?OUT_DIR}
secs=${2:-60}
mkdir -p "$out"
facts=$out/facts.jsonl
sock=gpumem-live-$$
tmux -L "$sock" new-session -d -x 200 -y 60 "bun src/cli.ts run -- python3 test/gpu/hf_gpt2.py --leak --seconds $secs --facts $facts"
shot() { # size screen-key label
  tmux -L "$sock" send-keys "$2"
  sleep 1.5
  { echo "=== $1, screen $2 ($3) at +$((SECONDS - t0)) s ==="; tmux -L "$sock" capture-pane -p; } >> "$out/screens.txt"
}
t0=$SECONDS
sleep 30  # the hook is built first on a fresh machine (about 20 s)
for k in 1 2 3 8 6; do shot 200x60 "$k" "after 30 s"; done
sleep $((secs / 3))
for k in 1 2 3; do shot 200x60 "$k" "a while on"; done
tmux -L "$sock" resize-window -x 80 -y 24 2>/dev/null || tmux -L "$sock" resize-window -t 0 -x 80 -y 24
sleep 2
for k in 1 2 3 6 8; do shot 80x24 "$k" "narrow"; done
tmux -L "$sock" kill-server 2>/dev/null
tail -n 1 "$facts" 2>/dev/null
