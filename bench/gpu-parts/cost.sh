#!/usr/bin/env bash
# Issue 38 on the GPU: the monitor's own cost, this tree beside an earlier one in the same run.
#   bash bench/gpu-parts/cost.sh OUT_DIR          (repo root, after `bun cuda/build.ts --install`; ~3 minutes)
# The earlier tree: $COST_BASE (a checkout with node_modules), else .carry/cost-base.tar.xz (a `git archive`
# of the earlier commit, unpacked to /tmp/cost-base with this tree's node_modules, and where it holds an
# nm-overlay/ folder, those files of its own patched dependencies over them); without either, this
# tree alone beside nvidia-smi.
# COST_PARTS: which of "start idle busy" to run (all by default).
#  1. start:  `--json --once` (the bundle, dist/cli.js) against `nvidia-smi --query-gpu=... --format=csv`,
#             Bun's floors and NVML's from C, the earlier tree's bundle: interleaved, START_REPS rounds
#             (default 60), a process holding 3 GiB (bench/start-floor.ts); where the time goes, step by
#             step: bundled (bench/startup.ts --bundle, 15 runs, medians) and from the sources (3 runs);
#             NVML's part call by call (bench/start-nvml.ts).
#  2. idle:   the screens (the bundle, 200x60 in tmux, Overview, 1 s interval) of both trees over the same
#             25 s, one GPU and no process on it (bench/monitor-cost.ts): CPU % of a core, largest RSS.
#  3. busy:   a transformers GPT-2 of hf_train's size (6x512, batch 16x256) under this tree's `run --json`;
#             beside it, following the same agent over the same 20 s: the screens of each tree on Overview,
#             Process and Tensors, `--json` of each tree (the session `run --json` runs), and that
#             `run --json` itself. COST_WARM: seconds every monitor runs before those 20 (default 5; the
#             engine compiles for the first half minute of a busy follower: COST_WARM=40 measures after
#             it, with the training lasting long enough), each figure with its compiler thread's share.
#             COST_SECONDS: instead of those 20 (with COST_WINDOW=S, bench/monitor-cost.ts gives each
#             S seconds too). CHURN=1: the threads this tree's idle and first busy screens start and
#             end meanwhile, and what the ended ones ran (bench/support/thread-churn.py), in
#             churn-idle.txt and churn-busy.txt.
# Everything lands in OUT_DIR (JSON, markdown, the panes as they were); a summary on stdout.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$PWD
log=$out/cost.log
: > "$log"
step() { # name seconds command...: under its own timeout, its output in the log
  local name=$1 t=$2; shift 2
  local t0=$SECONDS
  echo "== $name" >> "$log"
  timeout -k 5 "$t" "$@" >> "$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
  return $rc
}
# With CHURN: the threads this tree's first screens start and end over the seconds measured, and
# what the ended ones ran (bench/support/thread-churn.py): the CPU no thread's count holds.
# churn_start NAME WARM SECS: watched from WARM on, for SECS, into churn-NAME.txt (a monitor starts
# itself again with its engine settings, src/engine.ts: its command line begins with Bun's full path).
churn_start() {
  churn=
  [ -n "${CHURN:-}" ] || return 0
  ( sleep $(($2 + 1)); pid=$(pgrep -f "(^|/)bun(\.exe)? $root/dist/cli.js --interval 1000$" | head -1)
    [ -n "$pid" ] && python3 bench/support/thread-churn.py "$pid" "$3" > "$out/churn-$1.txt" 2>&1 ) &
  churn=$!
}
churn_show() { # NAME WHAT: once churn_start's watch has ended
  [ -n "${churn:-}" ] && wait "$churn"
  [ -f "$out/churn-$1.txt" ] && { echo "== $2: threads started and ended"; cat "$out/churn-$1.txt"; }
  return 0
}

# The earlier tree, its native library and bundle built by its own sources.
base=${COST_BASE:-}
if [ -z "$base" ] && [ -f .carry/cost-base.tar.xz ]; then
  rm -rf /tmp/cost-base && mkdir -p /tmp/cost-base && tar -xJf .carry/cost-base.tar.xz -C /tmp/cost-base && base=/tmp/cost-base
  # Its dependencies: this tree's, with the files its own patches left otherwise (nm-overlay/, where the
  # archive carries one: a patch of a dependency changed since) put back.
  if [ -d /tmp/cost-base/nm-overlay ]; then
    cp -a "$root/node_modules" /tmp/cost-base/node_modules && cp -a /tmp/cost-base/nm-overlay/. /tmp/cost-base/node_modules/
  else
    ln -sfn "$root/node_modules" /tmp/cost-base/node_modules
  fi
fi
if [ -n "$base" ]; then
  step base-build 90 env -C "$base" bun cuda/build.ts --install || base=
fi
echo "earlier tree: ${base:-none}"
{ nvidia-smi -L; nvidia-smi --query-compute-apps=pid,used_memory --format=csv; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

parts=${COST_PARTS:-start idle busy}
# 1. The start.
if [[ " $parts " == *" start "* ]]; then
# Its earlier tree: $START_BASE (a checkout with node_modules), else .carry/start-base.tar.xz (a `git
# archive` of the commit before the start's own changes), else the earlier tree above.
sbase=${START_BASE:-}
if [ -z "$sbase" ] && [ -f .carry/start-base.tar.xz ]; then
  rm -rf /tmp/start-base && mkdir -p /tmp/start-base && tar -xJf .carry/start-base.tar.xz -C /tmp/start-base \
    && ln -sfn "$root/node_modules" /tmp/start-base/node_modules && sbase=/tmp/start-base \
    && { step start-base-build 90 env -C "$sbase" bun cuda/build.ts --install || sbase=; }
fi
sbase=${sbase:-$base}
echo "the start's earlier tree: ${sbase:-none}"
step start-floor 100 bun bench/start-floor.ts "$out/start" "${START_REPS:-60}" $sbase && cat "$out/start/start-floor.md"
# Where the time goes: the bundled steps (the modules as the package runs them), 15 runs and their
# medians; then from the sources, 3 runs.
timeout -k 5 60 bun bench/startup.ts --bundle 15 > "$out/startup-bundle.txt" 2>&1
sed -n '/^medians/,$p' "$out/startup-bundle.txt"
for i in 1 2 3; do timeout -k 5 20 bun bench/startup.ts; done > "$out/startup.txt" 2>&1
grep -E 'total|wait|document holds' "$out/startup.txt"
# NVML's part, call by call in fresh processes, and its slow part's calls one after another and
# with the utilization queries on a second thread (bench/start-nvml.ts, bench/nvml_start.c).
step start-nvml 60 bun bench/start-nvml.ts "$out/start" 15 && sed -n '/^| call/,$p' "$out/start/start-nvml.md"
echo "== the start in short (start/start-floor.md, start/start-nvml.md):"
grep -E '^[|] (gpumem-tui|the earlier|--json|nvidia-smi|C: libgpumem)' "$out/start/start-floor.md"
grep -E '^- (nvidia-smi|The warm-up|The earlier)' "$out/start/start-floor.md" | cut -c1-200
grep -E 'one after another' "$out/start/start-nvml.md" | sed 's/.*interleaved: //'
fi
[ -f dist/cli.js ] || step bundle 60 bun run build:bundle
if [ -n "$base" ] && [ ! -f "$base/dist/cli.js" ]; then step base-bundle 60 env -C "$base" bun run build:bundle || base=; fi

mon() { # label tree [env]: the screens of that tree's bundle
  echo "$1=env $3 bun $2/dist/cli.js --interval 1000"
}
# 2. Idle: one GPU, no process on it.
if [[ " $parts " == *" idle "* ]]; then
idle=("$(mon screens-now "$root" "")")
[ -n "$base" ] && idle+=("$(mon screens-base "$base" "")")
# After COST_WARM seconds too (at most 30: an idle monitor's compiles end sooner than a busy one's;
# IDLE_WARM: exactly that many), over COST_SECONDS (default 25).
iwarm=${IDLE_WARM:-$(( ${COST_WARM:-3} < 30 ? ${COST_WARM:-3} : 30 ))}
isecs=${COST_SECONDS:-25}
churn_start idle "$iwarm" "$isecs"
step idle $((35 + isecs + iwarm)) bun bench/monitor-cost.ts "$out/idle.json" "$isecs" "$iwarm" "${idle[@]}"
bun -e "for (const r of require('$out/idle.json').runs) console.log('idle', r.label, r.cpu_percent_of_a_core, '% of a core', r.max_rss_mib, 'MiB')"
churn_show idle "this tree's idle screens"
fi

# 3. Following a busy GPT-2 (hf_train's size) under this tree's `run --json`.
[[ " $parts " == *" busy "* ]] || exit 0
dir=$(mktemp -d /tmp/cost-agents-XXXXXX)
chmod 700 "$dir"
warm=${COST_WARM:-5}
secs=${COST_SECONDS:-20}
train=(python3 test/gpu/hf_gpt2.py --batch 16 --seq 256 --seconds "${TRAIN_S:-$((15 + secs + warm))}")
# Bounded by timeout, whose child is the monitor measured (never a pipe held open by a watchdog).
GPUMEM_TUI_DIR=$dir timeout -k 5 $((60 + ${TRAIN_S:-$((15 + secs + warm))})) bun dist/cli.js run --json --interval 1000 --output /tmp/cost-run-now.ndjson -- "${train[@]}" > "$out/train.log" 2>&1 &
tpid=$!
rpid=
for _ in $(seq 1 50); do rpid=$(pgrep -P "$tpid" 2>/dev/null | head -1 || true); [ -n "$rpid" ] || rpid=$(cut -d" " -f1 "/proc/$tpid/task/$tpid/children" 2>/dev/null); [ -n "$rpid" ] && break; sleep 0.1; done
# At speed once the program prints its first rate (5 s into its steps; the hook built before that).
for _ in $(seq 1 120); do grep -q 'steps/s' "$out/train.log" 2>/dev/null && break; kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
grep -m1 'steps/s' "$out/train.log" || { echo "the training never reached its steps:"; tail -5 "$out/train.log"; }
busy=()
for k in 1 2 3; do
  busy+=("$(mon "screens-now@$k" "$root" "GPUMEM_TUI_DIR=$dir")")
  [ -n "$base" ] && busy+=("$(mon "screens-base@$k" "$base" "GPUMEM_TUI_DIR=$dir")")
done
busy+=("json-now=env GPUMEM_TUI_DIR=$dir bun $root/dist/cli.js --json --interval 1000 > /dev/null")
[ -n "$base" ] && busy+=("json-base=env GPUMEM_TUI_DIR=$dir bun $base/dist/cli.js --json --interval 1000 > /dev/null")
busy+=("run-json-now=pid:$rpid")
churn_start busy "$warm" "$secs"
step busy $((25 + secs + warm)) bun bench/monitor-cost.ts "$out/busy.json" "$secs" "$warm" "${busy[@]}"
bun -e "for (const r of require('$out/busy.json').runs) console.log('busy', r.label, r.key ?? '', r.cpu_percent_of_a_core, '% of a core (compiler', r.jit_percent_of_a_core, '%)', r.max_rss_mib, 'MiB', r.error ?? '')"
churn_show busy "the first screens of this tree"
grep 'steps/s' "$out/train.log" | tail -2
for _ in $(seq 1 60); do kill -0 "$tpid" 2>/dev/null || break; sleep 1; done
kill "$tpid" 2>/dev/null
wait "$tpid"
echo "run --json exit: $? ($(wc -l < /tmp/cost-run-now.ndjson 2>/dev/null || echo 0) documents)"
rm -rf "$dir" /tmp/cost-run-now.ndjson /tmp/cost-run-now.lines.json
