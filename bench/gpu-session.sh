#!/usr/bin/env bash
# One GPU session's batch (how bench/results/gpu-<date>/ was made), run from the repo root on the
# device machine with Bun and the runtime node_modules carried in .carry/:
#   bash bench/gpu-session.sh PART OUT_DIR
# PART: issues | harden | checks | costs | tests | final | attach | jobs | every-gpu | screens | screens-ab | stacks | e2e | zoo | perf | lanes | ranks | fixtures | exact (below). The GPU
# tests and end-to-end checkers live in test/gpu/ (also run by `bun run test:gpu`); the benchmarks in
# bench/. Every part under its own timeout; everything lands in OUT_DIR/all.tar.gz (the device returns
# few files) and a summary on stdout.
# fixtures (about 3 minutes; its two steps at most 8): small real fixtures, in OUT_DIR/fixtures.tar.gz (fixtures/):
#   snapshots/  test/fixtures/snapshots/capture_more.py: first-line-keep-logits, resnet-no-zero-grad,
#               compile-graphs, each NAME.pickle.gz (gzip -9) + NAME.facts.json, recorded from the
#               program's start with Python stacks
#   ring/       test/gpu/compile_graphs.py (torch.compile reduce-overhead) under `run --json`:
#               compile-graphs.ring.gz (the agent's compact copy), .json (its manifest), .facts.json
#               (torch's figures, pools per segment_pool_id), .run.ndjson.gz (the monitor's documents)
#   capture-more.log, compile-ring.log
#   FIXTURES=ring: the ring alone. Both compile from cold, each in caches of its own (outside OUT_DIR, removed after).
# exact (about 6 minutes, EXACT_BUDGET=420 s at most for its steps): issue 36's recordings, in OUT_DIR/exact.tar.gz (exact/):
#   rings/      test/gpu/exact_train.py under `run --json` with GPUMEM_TUI_MARKS=hooks (a SYNC and a SYNC_PEAKS
#               record of torch's figures at every module forward, backward and optimizer hook): gpt2 (transformers,
#               6 layers, 512 wide, 16x256, AdamW), resnet50 (torchvision, 8x3x224x224), expandable (gpt2 with
#               expandable_segments:True), fsdp2 (gpt2, fully_shard per block, one rank under torchrun), compile
#               (gpt2 under torch.compile reduce-overhead); attach-gpt2 (test/gpu/exact_attach.py: attached while
#               running, the mode asked in the target's environment; its seed as attach-gpt2.seed.json). Each
#               NAME.ring.gz (the agent's compact copy), NAME.json (manifest), NAME.facts.json (torch's figures at
#               the end), NAME.run.ndjson.gz (the monitor's documents). EXACT_STEPS: steps each (4).
#   snapshots/  test/fixtures/snapshots/capture_grads.py: grads-kept (zero_grad never called) and grads-zero-grad,
#               each NAME.pickle.gz (gzip -9) + NAME.facts.json, recorded from the program's first line
#   exact-*.log
set -u
part=${1:?PART}
out=${2:?OUT_DIR}
mkdir -p "$out/r"
r=$out/r
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
if ! command -v bun >/dev/null; then
  mkdir -p /tmp/bin && xz -dc .carry/bun.xz > /tmp/bin/bun && chmod +x /tmp/bin/bun
fi
[ -d node_modules ] || tar -xJf .carry/nm.tar.xz
bun cuda/build.ts --install > "$r/build.log" 2>&1 || { echo "native build failed"; tail -20 "$r/build.log"; }
{ nvidia-smi -L; python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, transformers.__version__)'; } > "$r/machine.txt" 2>&1
cat "$r/machine.txt"
step() { # name timeout command...
  local name=$1 t=$2; shift 2
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" > "$r/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s"; tail -n "${TAIL:-6}" "$r/$name.log"
}
case $part in
checks)  # what this session's changes touch: the costs by part, the files, the agent's GPU tests
  TAIL=14 step parts 240 python3 bench/agent_parts.py "$r/parts" ${PARTS_ARGS:-}
  step files 90 env PYTHONPATH=agent python3 test/agent/gpu_files.py
  TAIL=30 step agent-tests 200 env GPUMEM_GPU_TESTS=1 bun test test/agent/gpu.test.ts test/headless/run-final-names.test.ts
  ;;
costs)  # the costs by part alone, on a quiet machine
  TAIL=20 step parts 300 python3 bench/agent_parts.py "$r/parts" ${PARTS_ARGS:-}
  ;;
tests)  # every test, the GPU ones included
  TAIL=40 step gpu-tests 540 env GPUMEM_GPU_TESTS=1 GPUMEM_GPU_E2E=0 bun test
  ;;
final)  # every test; attach to a training started without the monitor
  TAIL=25 step gpu-tests 300 env GPUMEM_GPU_TESTS=1 GPUMEM_GPU_E2E=0 bun test
  TAIL=25 step attach 100 python3 test/gpu/attach_gpt2.py --out "$r/attach-gpt2.json"
  TAIL=25 step attach-leak 90 python3 test/gpu/attach_gpt2.py --leak --out "$r/attach-gpt2-leak.json"
  ;;
attach)  # attach to a training started without the monitor: at step 100 (then detach/attach cycles), at step 342, with a leak
  TAIL=25 step attach 140 python3 test/gpu/attach_gpt2.py --cycles "${CYCLES:-3}" --out "$r/attach-gpt2.json"
  TAIL=25 step attach-342 120 python3 test/gpu/attach_gpt2.py --before 342 --out "$r/attach-gpt2-342.json"
  TAIL=25 step attach-leak 90 python3 test/gpu/attach_gpt2.py --leak --out "$r/attach-gpt2-leak.json"
  ;;
jobs)  # two GPUs or more: attach to a torchrun DDP job, one rank per GPU watched in tmux, the compiled set-ups of the zoo
  TAIL=30 step attach-ddp 150 python3 test/gpu/attach_ddp.py --out "$r/attach-ddp.json"
  TAIL=30 step ranks 200 env OUT="$r/ranks" BUN=bun PY=python3 bash test/gpu/ranks.sh 45
  TAIL=30 step zoo 220 bun test/gpu/zoo.ts "$r/zoo" --only compile,compile-cudagraphs --scale 0.5 --budget 200
  ;;
every-gpu)  # four GPUs or more: one rank per GPU watched (steady CPU too), attach to a DDP job, the whole zoo
  TAIL=30 step ranks 170 env OUT="$r/ranks" BUN=bun PY=python3 bash test/gpu/ranks.sh 50
  TAIL=20 step attach-ddp 120 python3 test/gpu/attach_ddp.py --seconds 35 --out "$r/attach-ddp.json"
  TAIL=40 step zoo 270 bun test/gpu/zoo.ts "$r/zoo" --scale 0.5 --budget 250
  ;;
screens)  # the screens' own CPU following busy ranks (issue 27): a rank per GPU watched (MON_PROF=1: the monitor profiled; SCREENS_PROF=1: the simulated ranks again, profiled), the simulated four ranks on this host's CPU; BASE_TREE=DIR: the same, in turn, for the tree in DIR (its node_modules in it)
  for tree in "$PWD" ${BASE_TREE:-}; do
    label=head; [ "$tree" = "$PWD" ] || label=base
    (cd "$tree" && bun cuda/build.ts --install > "$r/build-$label.log" 2>&1)
    TAIL=4 step "ranks-$label" 170 env -C "$tree" OUT="$r/ranks-$label" BUN=bun PY=python3 ${MON_PROF:+MON_PROF=$out/prof-$label} bash test/gpu/ranks.sh 50
    grep -E 'screens following|monitor following' "$r/ranks-$label/ranks.md"
    TAIL=2 step "screens-agents-$label" 120 env -C "$tree" bun bench/screens-agents.ts "$r/screens-agents-$label" 20 4 165000
    cp "$r/ranks-$label/ranks.md" "$out/ranks-$label.md"; cp "$r/ranks-$label/monitor.txt" "$out/monitor-$label.txt"
    cp "$r/screens-agents-$label/screens-agents-4.json" "$out/screens-agents-4-$label.json"
  done
  # Where the busy screens' time goes on this host: the simulated ranks again, the monitor profiled.
  [ -z "${SCREENS_PROF:-}" ] || TAIL=2 step screens-agents-prof 120 env GPUMEM_BENCH_PROF="$out/prof-screens" bun bench/screens-agents.ts "$r/screens-agents-prof" 20 4 165000
  ;;
screens-ab)  # issue 27's target, this tree beside BASE_TREE (required) following the same real ranks over the same seconds (bench/ranks-ab.sh), the simulated ranks for each tree in turn, then test/gpu/ranks.sh's checks on this tree (MON_PROF=1: that monitor profiled; NO_SIMULATED=1, NO_RANKS_CHECKS=1: those left out)
  (cd "$BASE_TREE" && bun cuda/build.ts --install > "$r/build-base.log" 2>&1)
  TAIL=14 step ranks-ab 240 env OUT="$r/ranks-ab" BASE_TREE="$BASE_TREE" BUN=bun PY=python3 bash bench/ranks-ab.sh
  cp "$r/ranks-ab/ranks-ab.md" "$r/ranks-ab/ranks-ab.json" "$out/" 2>/dev/null
  for tree in "$PWD" "$BASE_TREE"; do
    [ -z "${NO_SIMULATED:-}" ] || break
    label=head; [ "$tree" = "$PWD" ] || label=base
    TAIL=2 step "screens-agents-$label" 120 env -C "$tree" bun bench/screens-agents.ts "$r/screens-agents-$label" 20 4 165000
    cp "$r/screens-agents-$label/screens-agents-4.json" "$out/screens-agents-4-$label.json"
  done
  if [ -z "${NO_RANKS_CHECKS:-}" ]; then
    TAIL=4 step ranks-head 170 env OUT="$r/ranks-head" BUN=bun PY=python3 ${MON_PROF:+MON_PROF=$out/prof-head} bash test/gpu/ranks.sh 50
    grep -E 'screens following|monitor following|FAIL' "$r/ranks-head/ranks.md"
    cp "$r/ranks-head/ranks.md" "$out/ranks-head.md"; cp "$r/ranks-head/monitor.txt" "$out/monitor-head.txt"
  fi
  ;;
stacks)  # the hook's Python stacks (GPUMEM_TUI_STACKS): the GPU test, the hook's cost per event, the step with stacks against torch's recorder
  TAIL=20 step stacks-test 240 env GPUMEM_GPU_TESTS=1 bun test test/headless/run-stacks.test.ts test/agent/stacks.test.ts
  TAIL=14 step hook_cost 200 python3 bench/hook_cost.py "$r/perf" --runs 200 --events 100000
  TAIL=30 step overhead-stacks 560 python3 bench/agent_overhead_gpt2.py "$r/perf" --reps 6 --modes none,agent,agent-stacks,history-python
  ;;
late)  # after the last changes to the agent and the NVML loader: those tests, attach with a leak
  TAIL=20 step gpu-ffi-system 90 env GPUMEM_GPU_TESTS=1 GPUMEM_GPU_E2E=0 bun test test/ffi test/system
  TAIL=25 step attach-leak 80 python3 test/gpu/attach_gpt2.py --leak --out "$r/attach-gpt2-leak.json"
  ;;
e2e)  # the end-to-end checkers on a real training (tmux, d, e, kill -9, OOM; a transformers GPT-2)
  TAIL=30 step e2e 580 env GPUMEM_GPU_TESTS=1 GPUMEM_GPU_REPORTS="$r/e2e" bun test test/gpu/e2e-gpu.test.ts test/gpu/e2e-hf.test.ts
  ;;
harden)  # issue 35 on the GPU: a hook built by the tree before (.carry/base.tar.xz) rebuilt once by this one, the agent's GPU tests and files, attach to a leaking training
  rm -rf /tmp/base && mkdir -p /tmp/base && tar -xJf .carry/base.tar.xz -C /tmp/base && ln -s "$PWD/node_modules" /tmp/base/node_modules
  (cd /tmp/base && bun cuda/build.ts --install > "$r/build-base.log" 2>&1)
  TAIL=12 step rekey 200 bash bench/hook-rekey.sh /tmp/base "$r/rekey"
  # What the key now costs each start: torch's include_paths come from cpp_extension (setuptools).
  step cpp-ext-import 60 python3 -c 'import time, torch; t = time.perf_counter(); import torch.utils.cpp_extension as c; d = time.perf_counter() - t; print("import torch.utils.cpp_extension after torch: %.1f ms" % (d * 1e3)); print(c.include_paths("cuda"))'
  step files 60 env PYTHONPATH=agent python3 test/agent/gpu_files.py
  TAIL=30 step agent-tests 200 env GPUMEM_GPU_TESTS=1 bun test test/agent/gpu.test.ts test/headless/run-final-names.test.ts
  TAIL=25 step attach-leak 90 python3 test/gpu/attach_gpt2.py --leak --out "$r/attach-gpt2-leak.json"
  ;;
zoo)  # every set-up of the zoo, plain and under the agent
  TAIL=40 step zoo 540 bun test/gpu/zoo.ts "$r/zoo" ${ZOO_ARGS:-}
  ;;
perf)  # the hook's cost per event, NVML against nvidia-smi, the start, the agent on a GPT-2 step
  TAIL=14 step hook_cost 240 python3 bench/hook_cost.py "$r/perf" --runs 300 --events 100000
  TAIL=8 step nvml 240 bun bench/nvml.ts "$r/perf"
  TAIL=10 step startup 120 bun bench/startup.ts
  TAIL=20 step overhead-gpt2 570 python3 bench/agent_overhead_gpt2.py "$r/perf" --reps 8
  ;;
lanes)  # the ring's lanes on one and two devices against torch's figures (test/gpu/lanes-check.ts)
  for d in 1 2; do
    step "lanes-$d" 180 env PYTHONPATH=agent GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR="$r/agents-$d" python3 test/gpu/lanes_run.py "$r" --devices "$d" --events 2000
    TAIL=20 step "lanes-$d-check" 120 bun test/gpu/lanes-check.ts "$r/lanes-$d.facts.json"
  done
  ;;
ranks)  # one rank per GPU under `gpumem-tui run`, watched in tmux, a rank killed mid-run
  TAIL=30 step ranks 300 env OUT="$r/ranks" BUN=bun PY=python3 bash test/gpu/ranks.sh
  ;;
fixtures)  # snapshots recorded from the program's start, and a ring of a CUDA-graphs run (header)
  fx=$r/fixtures
  tmpc=$(mktemp -d /tmp/gpumem-fixtures.XXXXXX)
  mkdir -p "$fx/snapshots" "$fx/ring" && mkdir -m 700 "$tmpc/agents"
  [ "${FIXTURES:-all}" = ring ] || TAIL=12 step capture-more 300 env TORCHINDUCTOR_CACHE_DIR="$tmpc/inductor-snap" TRITON_CACHE_DIR="$tmpc/triton-snap" \
    python3 test/fixtures/snapshots/capture_more.py "$fx/snapshots"
  # The ring's segment records carry their pools (manifest segment_pools), checked against the facts' pools.
  # One GPU visible: the ring's lanes are the shared one and that device's, as in the other rings.
  TAIL=12 step compile-ring 180 env GPUMEM_TUI_VERBOSE=1 CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" GPUMEM_TUI_DIR="$tmpc/agents" GPUMEM_TUI_KEEP=1 GPUMEM_TUI_RING_CAPACITY=524288 \
    TORCHINDUCTOR_CACHE_DIR="$tmpc/inductor-ring" TRITON_CACHE_DIR="$tmpc/triton-ring" \
    bun src/cli.ts run --json --output "$fx/ring/compile-graphs.run.ndjson" -- python3 test/gpu/compile_graphs.py --out "$fx/ring"
  for f in "$fx"/snapshots/*.pickle "$fx"/ring/*.ring "$fx"/ring/*.ndjson; do [ -f "$f" ] && gzip -9 -f "$f"; done
  cp "$r"/capture-more.log "$r/compile-ring.log" "$fx/" 2>/dev/null
  tar -czf "$out/fixtures.tar.gz" -C "$r" fixtures && rm -rf "$fx"
  rm -rf "$tmpc"
  tar -tvzf "$out/fixtures.tar.gz"
  ;;
exact)  # issue 36: rings with torch's figures at every hook (GPUMEM_TUI_MARKS=hooks), the snapshot pair (header)
  ex=$r/exact
  tmpx=$(mktemp -d /tmp/gpumem-exact.XXXXXX)
  mkdir -p "$ex/rings" "$ex/snapshots" && mkdir -m 700 "$tmpx/agents"
  deadline=$((SECONDS + ${EXACT_BUDGET:-420}))
  # Each step's limit: its own, or what is left of the part's budget (at least 10 s).
  left() { local l=$((deadline - SECONDS)); [ "$l" -lt "$1" ] || l=$1; [ "$l" -ge 10 ] || l=10; echo "$l"; }
  # One recording under `run --json`: NAME SECONDS [ENV=VALUE...] -- COMMAND... (its steps: exact_train.py)
  record() {
    local name=$1 t=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    TAIL=4 step "exact-$name" "$(left "$t")" env ${envs[@]+"${envs[@]}"} GPUMEM_TUI_MARKS=hooks GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR="$tmpx/agents" \
      GPUMEM_TUI_RING_CAPACITY=524288 CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
      TORCHINDUCTOR_CACHE_DIR="$tmpx/inductor-$name" TRITON_CACHE_DIR="$tmpx/triton-$name" \
      bun src/cli.ts run --json --output "$ex/rings/$name.run.ndjson" -- "$@"
  }
  steps=${EXACT_STEPS:-4}
  # In the order of what matters most, should the budget run out: the first builds the hook.
  record gpt2 180 -- python3 test/gpu/exact_train.py --model gpt2 --out "$ex/rings" --steps "$steps"
  TAIL=6 step exact-snapshots "$(left 120)" python3 test/fixtures/snapshots/capture_grads.py "$ex/snapshots"
  record resnet50 100 -- python3 test/gpu/exact_train.py --model resnet50 --out "$ex/rings" --steps "$steps"
  record compile 180 -- python3 test/gpu/exact_train.py --model compile --out "$ex/rings" --steps $((steps + 1))
  record fsdp2 100 -- python3 -m torch.distributed.run --standalone --nproc-per-node=1 \
    test/gpu/exact_train.py --model fsdp2 --out "$ex/rings" --steps "$steps"
  record expandable 90 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- \
    python3 test/gpu/exact_train.py --model gpt2 --name expandable --out "$ex/rings" --steps "$steps"
  TAIL=8 step exact-attach "$(left 150)" python3 test/gpu/exact_attach.py --out "$ex/rings" --steps "$steps" --wait 90
  for f in "$ex"/snapshots/*.pickle "$ex"/rings/*.ring "$ex"/rings/*.ndjson; do [ -f "$f" ] && gzip -9 -f "$f"; done
  cp "$r"/exact-*.log "$ex/" 2>/dev/null
  tar -czf "$out/exact.tar.gz" -C "$r" exact && rm -rf "$ex"
  rm -rf "$tmpx"
  tar -tvzf "$out/exact.tar.gz"
  ;;
issues)  # each issue's own GPU script, bench/gpu-parts/NAME.sh OUT (its header says what it records), each under its own limit (PART_SECONDS, 270); ONLY=a,b: those alone; TOGETHER=a,b: those first, side by side (recordings that time nothing), then the others one at a time (they time things). Each leaves OUT_DIR/r/NAME/.
  chosen() { case ",${ONLY:-$1}," in *",$1,"*) return 0 ;; esac; return 1; }
  together() { case ",${TOGETHER:-}," in *",$1,"*) return 0 ;; esac; return 1; }
  # The hook built once, before parts that start side by side would each wait on its build.
  warm=$(mktemp -d /tmp/gpumem-warm.XXXXXX) && chmod 700 "$warm"
  step hook-warm 150 env GPUMEM_TUI_DIR="$warm" bun src/cli.ts run --json --output "$warm/run.ndjson" -- python3 -c 'import torch; torch.zeros(1, device="cuda"); print("hook:", torch.cuda.memory_allocated())'
  rm -rf "$warm"
  for f in bench/gpu-parts/*.sh; do
    name=$(basename "$f" .sh)
    chosen "$name" && together "$name" || continue
    mkdir -p "$r/$name"
    TAIL=12 step "part-$name" "${PART_SECONDS:-270}" bash "$f" "$r/$name" > "$r/part-$name.summary" 2>&1 &
  done
  wait
  cat "$r"/part-*.summary 2>/dev/null
  for f in bench/gpu-parts/*.sh; do
    name=$(basename "$f" .sh)
    chosen "$name" && ! together "$name" || continue
    mkdir -p "$r/$name"
    TAIL=12 step "part-$name" "${PART_SECONDS:-270}" bash "$f" "$r/$name"
  done
  ;;
*) echo "unknown PART $part"; exit 2 ;;
esac
cp "$r/parts/agent_parts.md" "$out/" 2>/dev/null
cp "$r"/perf/*.md "$out/" 2>/dev/null
cp "$r/zoo/ZOO.md" "$out/" 2>/dev/null
tar -czf "$out/all.tar.gz" -C "$out" r && rm -rf "$r"
