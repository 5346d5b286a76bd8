#!/usr/bin/env bash
# Issue 37, the monitor's side: the user's line in the findings, the Tensors screen and the snapshots,
# on one GPU with NO variable set (stacks are on by default), from the repo root after
# `bun cuda/build.ts --install`:
#   bash bench/gpu-parts/lines.sh OUT_DIR
# Each program is test/gpu/lines_train.py (its `line:NAME` marks are the lines to find):
#   leak         the GPT-2 keeping 2 MiB of logits a step, under `run --json`: growth names line:keep
#                in the run's last document (after the training is let go) and in the replays of
#                leak.ring and of leak.exit.ring (saved again once the training was let go)
#   attach-leak  the same started without the agent, attached while it trains (a warm-up step, then
#                steps until the agent is in; attach --no-monitor), a live `--json --once` document
#                while it lingers, its ring replayed with the seed: growth names line:keep; the seed
#                carries torch's peaks from before the attach (peak_allocated, peak_reserved), which
#                the rings' test holds the replay's peak to
#   nograd       a ResNet50 without zero_grad under `run --json`: gradients kept names line:resnet-backward
#                and line:resnet-optimizer
#   oom          24 GiB held (line:hold), a request larger than the device (line:ask), then a batch halved
#                until it fits, under `run --json`: the OOM names line:ask and line:hold
#   frag         one cached 8 GiB segment cut into 200 MiB pieces, every other one freed, the cache
#                emptied, the process capped, 400 MiB asked: the OOM names line:frag-ask,
#                reserved-unallocated line:pieces
#   dump         the leak under the screens in tmux, `d` pressed: the monitor's snapshot opened by
#                torch.cuda._memory_viz (segment_plot, trace_plot) with line:keep in its frames; and
#                `replay leak.ring --snapshot` the same
# OUT_DIR: fixtures/ (NAME.ring.gz, NAME.json, NAME.facts.json, NAME.doc.json.gz: the last document
# of a run; leak.exit.ring.gz and leak.exit.json; attach-leak.seed.json), logs/, checks.txt (PASS/FAIL
# lines), ingest-*/ingest-ring.json (the ingest with stacks over without, a record),
# logs/rings-tests.log (this run's recordings through test/headless/lines-gpu-rings.test.ts), on
# stdout a summary. At most 4 minutes. test/fixtures/lines/ holds one run's fixtures/ but the
# .doc.json.gz (all from the same run: the tests find lines by the facts' `line:NAME` marks, which
# move with test/gpu/lines_train.py).
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/fixtures" "$out/logs"
out=$(cd "$out" && pwd)
fx=$out/fixtures
logs=$out/logs
checks=$out/checks.txt
: > "$checks"
root=$(pwd)
tmp=$(mktemp -d /tmp/gpumem-lines.XXXXXX)
mkdir -m 700 "$tmp/agents" "$tmp/dump" "$tmp/dumpfx"
sock=gpumem-lines-${tmp##*.}
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
# Nothing set: what a user gets (the capture side makes stacks default-on).
unset GPUMEM_TUI_STACKS GPUMEM_TUI_LIBRARY GPUMEM_TUI_USER_CODE PYTHONPATH
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${LINES_BUDGET:-225}))
# Each step's limit: its own, or what is left of the budget (at least 5 s).
left() { local l=$((deadline - SECONDS)); [ "$l" -lt "$1" ] || l=$1; [ "$l" -ge 5 ] || l=5; echo "$l"; }
step() { # name seconds command...
  local name=$1 t; t=$(left "$2"); shift 2
  local t0=$SECONDS
  # A function of this script runs in a bash of its own (timeout runs programs): exported below.
  if [ "$(type -t "$1")" = function ]; then set -- bash -c "$*"; fi
  timeout -k 5 "$t" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s (limit $t)"; tail -n "${TAIL:-3}" "$logs/$name.log"
}
check() { python3 bench/gpu-parts/lines_check.py "$@" | tee -a "$checks"; }
last_doc() { # NDJSON -> its last line as NAME.doc.json (the checks) and .gz (kept)
  [ -s "$1" ] || return 0
  tail -n 1 "$1" > "$2" && gzip -9 -c "$2" > "$2.gz"
}

# 1. The leak under plain run (the first step builds the hook: ~20 s on a fresh machine).
# --exit-ring: the ring saved again once the training is let go (leak.exit.ring), what the run's
# last document is made from (the first H200 run's named no line there).
step leak-run 110 bun src/cli.ts run --json --output "$tmp/leak.run.ndjson" -- python3 test/gpu/lines_train.py leak --out "$fx" --steps 12 --exit-ring
last_doc "$tmp/leak.run.ndjson" "$fx/leak.doc.json"
check leak-run "$fx/leak.doc.json" "$fx/leak.facts.json" growth:keep
step leak-replay 30 bun src/cli.ts replay "$fx/leak.ring" --json
last_doc "$logs/leak-replay.log" "$tmp/leak.replay.json"
check leak-replay "$tmp/leak.replay.json" "$fx/leak.facts.json" growth:keep
step leak-exit-replay 30 bun src/cli.ts replay "$fx/leak.exit.ring" --json
last_doc "$logs/leak-exit-replay.log" "$tmp/leak.exit.replay.json"
check leak-exit-replay "$tmp/leak.exit.replay.json" "$fx/leak.facts.json" growth:keep

# 2. The same under attach: started without the agent, attached after one step.
attach_leak() {
  env GPUMEM_TUI_DIR="$tmp/agents" GPUMEM_TUI_KEEP=1 python3 test/gpu/lines_train.py leak --name attach-leak --out "$fx" \
    --steps 12 --attach-wait 60 --linger 12 > "$logs/attach-train.log" 2>&1 &
  local train=$! pid="" i
  for i in $(seq 1 600); do
    pid=$(awk '/^ready /{print $2; exit}' "$logs/attach-train.log")
    [ -n "$pid" ] && break
    kill -0 "$train" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$pid" ]; then echo "the training never said ready"; wait "$train"; return 1; fi
  GPUMEM_TUI_DIR="$tmp/agents" bun src/cli.ts attach "$pid" --no-monitor --timeout 60; echo "attach: exit $?"
  for i in $(seq 1 400); do [ -e "$fx/attach-leak.trained" ] && break; kill -0 "$train" 2>/dev/null || break; sleep 0.1; done
  GPUMEM_TUI_DIR="$tmp/agents" timeout -k 2 20 bun src/cli.ts --json --once > "$tmp/attach.once.json"; echo "--json --once: exit $?"
  wait "$train"; echo "training: exit $?"
  local seed
  seed=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("seed") or {}).get("path") or "")' "$fx/attach-leak.json" 2>/dev/null)
  if [ -n "$seed" ] && [ -f "$seed" ]; then cp "$seed" "$fx/attach-leak.seed.json"; echo "seed copied"; else echo "no seed: '$seed'"; fi
}
export -f attach_leak
export tmp fx logs sock
TAIL=6 step attach 100 attach_leak
last_doc "$tmp/attach.once.json" "$tmp/attach.once.doc.json"
check attach-live "$tmp/attach.once.doc.json" "$fx/attach-leak.facts.json" growth:keep
step attach-replay 30 bun src/cli.ts replay "$fx/attach-leak.ring" --json
last_doc "$logs/attach-replay.log" "$tmp/attach.replay.json"
check attach-replay "$tmp/attach.replay.json" "$fx/attach-leak.facts.json" growth:keep

# 3. ResNet50 without zero_grad.
step nograd-run 70 bun src/cli.ts run --json --output "$tmp/nograd.run.ndjson" -- python3 test/gpu/lines_train.py nograd --out "$fx" --steps 6
last_doc "$tmp/nograd.run.ndjson" "$fx/nograd.doc.json"
check nograd-run "$fx/nograd.doc.json" "$fx/nograd.facts.json" gradients_kept:resnet-backward,resnet-optimizer

# 4. OOM: the line that asked, the lines holding most.
step oom-run 80 bun src/cli.ts run --json --output "$tmp/oom.run.ndjson" -- python3 test/gpu/lines_train.py oom --out "$fx" --steps 4
last_doc "$tmp/oom.run.ndjson" "$fx/oom.doc.json"
check oom-run "$fx/oom.doc.json" "$fx/oom.facts.json" oom:ask,hold

# 4b. Fragmentation: holes left by the freed pieces, and an OOM no hole held.
step frag-run 60 bun src/cli.ts run --json --output "$tmp/frag.run.ndjson" -- python3 test/gpu/lines_train.py frag --out "$fx" --steps 2
last_doc "$tmp/frag.run.ndjson" "$fx/frag.doc.json"
check frag-run "$fx/frag.doc.json" "$fx/frag.facts.json" oom:frag-ask reserved_unallocated:pieces

# 5. Snapshots: `d` on the screens of a live run, and replay --snapshot; each through memory_viz.
dump_live() {
  local i f=""
  tmux -L "$sock" new-session -d -c "$PWD" -x 200 -y 50 "bun src/cli.ts --dump-dir $tmp/dump run -- python3 test/gpu/lines_train.py leak --name dump-leak --out $tmp/dumpfx --steps 8 --linger 20; sleep 5"
  for i in $(seq 1 500); do [ -e "$tmp/dumpfx/dump-leak.trained" ] && break; sleep 0.1; done
  sleep 2  # a tick of the monitor after the last step
  tmux -L "$sock" send-keys d
  for i in $(seq 1 150); do f=$(ls "$tmp"/dump/*.pickle 2>/dev/null | head -1); [ -n "$f" ] && break; sleep 0.1; done
  sleep 1
  tmux -L "$sock" capture-pane -p | tail -n 4
  tmux -L "$sock" kill-server 2>/dev/null
  [ -n "$f" ] && cp "$f" "$tmp/dump.pickle" && echo "d wrote $(basename "$f")"
}
export -f dump_live
TAIL=6 step dump-live 70 dump_live
cp "$tmp/dumpfx/dump-leak.facts.json" "$tmp/dump.facts.json" 2>/dev/null || cp "$fx/leak.facts.json" "$tmp/dump.facts.json"
step dump-viz 40 python3 bench/gpu-parts/lines_viz.py "$tmp/dump.pickle" "$tmp/dump.facts.json" keep
sed 's/^/dump-viz (d): /' "$logs/dump-viz.log" | tail -n 1 >> "$checks"
step replay-snapshot 30 bun src/cli.ts replay "$fx/leak.ring" --snapshot "$tmp/replay.pickle"
step replay-viz 40 python3 bench/gpu-parts/lines_viz.py "$tmp/replay.pickle" "$fx/leak.facts.json" keep
sed 's/^/replay-viz (--snapshot): /' "$logs/replay-viz.log" | tail -n 1 >> "$checks"

# 6. The ingest with the hook's stacks against without, a record each, on the rings just recorded
# (this machine's quiet cores: the ratio is the figure), and the CPU tests that have torch here.
for n in leak nograd; do
  [ -f "$fx/$n.ring" ] && step "ingest-$n" 40 env LAPS=200 WARM=60 STACKS_AB=1 FIX="$fx/$n.ring" bun bench/ingest-ring.ts "$out/ingest-$n"
done
for f in "$fx"/*.ring; do [ -f "$f" ] && gzip -9 -f "$f"; done
# The CPU tests that have torch here, and this run's recordings through the tests of the committed ones.
step cpu-tests 40 bun test test/snapshot/lines-frames.test.ts test/headless/finding-lines.test.ts
TAIL=14 step rings-tests 40 env GPUMEM_LINES_FIXTURES="$fx" bun test test/headless/lines-gpu-rings.test.ts
rm -f "$fx"/*.trained "$fx"/*.doc.json
du -sh "$out" | sed 's/^/size: /'
ls -la "$fx"
echo "== checks"
cat "$checks"
