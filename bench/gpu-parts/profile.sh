#!/usr/bin/env bash
# Issue 38: where the monitor's own CPU goes on a GPU host, as Bun's sampling profiler sees it
# (bun --cpu-prof-md: one grep-friendly markdown profile a process, and the raw .cpuprofile gzip'd, whose
# samples' times let bench/support/prof-after.py count only those after the engine's compiles), in at most
# 3 minutes. PROF_SECS: how long each is profiled (default 20; the busy ones run side by side, so 60 costs
# no more than a minute more):
#   bash bench/gpu-parts/profile.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
#   idle-overview.md   the screens, 200x60 under tmux, one GPU and no process, 20 s
#   busy-overview.md, busy-process.md   the screens following a transformers GPT-2 (hf_train's
#                      size, 16 x 256) that runs under `run --json`, 20 s each
#   busy-json.md       `--json` following it, 20 s (ended by SIGINT, as a user ends it)
#   run-json.md        that `run --json` itself, the whole training
#   nvml.txt           bench/nvml.ts's cost of one NVML sample through bun:ffi
# The CPU figures without the profiler are bench/gpu-parts/cost.sh's; this says what to cut.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
root=$(pwd)
[ -f dist/cli.js ] || timeout -k 5 60 bun run build:bundle > "$out/bundle.log" 2>&1
tmp=$(mktemp -d /tmp/gpumem-prof.XXXXXX)
chmod 700 "$tmp"
sock=gpumem-prof-${tmp##*.}
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
# name seconds [keys] [env...]: the screens under tmux, profiled, ended with q
secs=${PROF_SECS:-20}
# screens_start name [keys] [env...]: the screens under tmux, profiled; screens_end name: ended with q
screens_start() {
  local name=$1 keys=$2; shift 2
  mkdir -p "$tmp/$name"
  tmux -L "$sock" new-session -d -s "$name" -x 200 -y 60 \
    "env $* timeout --foreground -k 5 $((secs + 30)) bun --cpu-prof --cpu-prof-md --cpu-prof-dir=$tmp/$name $root/dist/cli.js --interval 1000; sleep 2"
  sleep 2
  [ -n "$keys" ] && tmux -L "$sock" send-keys -t "$name" "$keys"
}
keep() { # name: the profile's markdown and its raw samples into OUT
  cp "$tmp/$1"/*.md "$out/$1.md" 2>/dev/null && echo "== $1: profiled" || echo "== $1: no profile"
  for f in "$tmp/$1"/*.cpuprofile; do [ -f "$f" ] && gzip -c "$f" > "$out/$1.cpuprofile.gz"; done
}
screens_end() {
  tmux -L "$sock" capture-pane -p -t "$1" > "$out/$1.pane.txt"
  tmux -L "$sock" send-keys -t "$1" q
}
screens() { # name [keys] [env...]: one screen alone for $secs
  screens_start "$@"
  sleep "$secs"
  screens_end "$1"
  sleep 3
  keep "$1"
}
{ nvidia-smi -L; git log -1 --format=%h; } > "$out/machine.txt" 2>&1
timeout -k 5 40 bun bench/nvml.ts "$tmp/nvml" > "$out/nvml.txt" 2>&1; echo "== nvml: exit $?"
screens idle-overview ""

dir=$tmp/agents
mkdir -m 700 "$dir"
mkdir -p "$tmp/run"
GPUMEM_TUI_DIR=$dir timeout -k 5 $((secs + 100)) bun --cpu-prof --cpu-prof-md --cpu-prof-dir="$tmp/run" dist/cli.js run --json --interval 1000 --output "$tmp/run.ndjson" -- \
  python3 test/gpu/hf_gpt2.py --batch 16 --seq 256 --seconds $((secs + 55)) > "$out/train.log" 2>&1 &
tpid=$!
for _ in $(seq 1 90); do grep -q 'steps/s' "$out/train.log" 2>/dev/null && break; kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
grep -m1 'steps/s' "$out/train.log" || { echo "the training never reached its steps:"; tail -5 "$out/train.log"; }
# the busy ones side by side over the same seconds (one training, a core each on the host)
screens_start busy-overview "" "GPUMEM_TUI_DIR=$dir"
screens_start busy-process "2" "GPUMEM_TUI_DIR=$dir"
screens_start busy-tensors "3" "GPUMEM_TUI_DIR=$dir"
mkdir -p "$tmp/busy-json"
GPUMEM_TUI_DIR=$dir timeout -k 5 $((secs + 30)) bun --cpu-prof --cpu-prof-md --cpu-prof-dir="$tmp/busy-json" dist/cli.js --json --interval 1000 > /dev/null 2> "$out/busy-json.err" &
jpid=$!
sleep "$secs"
for s in busy-overview busy-process busy-tensors; do screens_end "$s"; done
kill -INT "$jpid"; wait "$jpid"; echo "== busy-json: exit $?"
sleep 3
for s in busy-overview busy-process busy-tensors busy-json; do keep "$s"; done
wait "$tpid"; echo "== run --json: exit $?"
keep run
mv "$out/run.md" "$out/run-json.md" 2>/dev/null; mv "$out/run.cpuprofile.gz" "$out/run-json.cpuprofile.gz" 2>/dev/null
grep 'steps/s' "$out/train.log" | tail -1
# Samples a function was on top of (the markdown's "Self" weighs each sample by the wall time since
# the one before, idle waits included; the counts are the CPU's): the 12 most, per profile.
for f in "$out"/*.md; do
  echo "--- $(basename "$f")"
  python3 - "$f" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"\| [\d.]+s \| (\d+) \|", t)
rows = sorted(((int(n), f, l) for f, l, n in re.findall(r"### `([^`]+)`\n`([^`]*)` \| Self: [^|]+\| Total: [^|]+\| Samples: (\d+)", t)), reverse=True)
print("samples", m.group(1) if m else "?", "; top:", ", ".join("%s %d" % (f, n) for n, f, l in rows[:12]))
PY
done
du -sh "$out"
