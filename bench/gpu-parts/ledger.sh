#!/usr/bin/env bash
# Issue 40's GPU evidence and fixtures: what is outside PyTorch, against NVML's per-process used.
#   bash bench/gpu-parts/ledger.sh OUT_DIR
# Run from the repository root on the device after `bun cuda/build.ts --install` (bun on PATH; python3
# with torch, transformers, nvidia-ml-py). Every step under `timeout -k 5`; at most 4 minutes in all.
# Each program is test/gpu/ledger_prog.py (its docstring says what each case does): it writes
# NVML's used bytes of its own process (pynvml) beside torch's figures before and after each event
# (the ground truth, whatever this tree's monitor makes of it), and under `gpumem-tui run --json`
# the agent's compact ring; the monitor's documents beside it (NAME.run.ndjson: NVML used, torch's
# figures and, where this tree has it, the ledger, every 500 ms).
#   bare-plain   torch.zeros(1) and a matmul without the monitor: the context a bare process shows
#   bare         the same under run --json
#   gpt2         transformers GPT-2 (config) 4 AdamW steps under run --json
#   rawmalloc    256 MiB through a raw cudaMalloc (ctypes) inside record_function("gpumem:cudart:cudaMalloc")
#   nccl         torchrun, one rank: init_process_group("nccl"), all_reduce x2, new_group + all_reduce, destroy
#   compile      torch.compile(mode="reduce-overhead") small GPT-2, 4 steps (a private pool)
#   fsdp2        torchrun, one rank: the GPT-2 with fully_shard per block, 4 steps (NCCL's communicator
#                at the first all-gather), destroy
#   attach-gpt2  the GPT-2 started plainly, attached after step 2, 8 steps; the monitor's --json beside it
# OUT_DIR/ledger/: NAME.facts.json, NAME.ring.gz + NAME.json (manifest), NAME.run.ndjson.gz, NAME.log;
# OUT_DIR/ledger/summary.txt (also on stdout): each event's NVML − reserved delta, the checks.
set -u
out=${1:?OUT_DIR}
o=$out/ledger
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$SECONDS
budget=${LEDGER_BUDGET:-225}
tmp=$(mktemp -d /tmp/gpumem-ledger.XXXXXX)
mkdir -m 700 "$tmp/agents"
trap 'rm -rf "$tmp"' EXIT
left() { local l=$((budget - (SECONDS - start))); [ "$l" -lt "$1" ] || l=$1; echo "$l"; }
step() { # NAME SECONDS COMMAND...
  local name=$1 t; t=$(left "$2"); shift 2
  # LEDGER_ONLY=a,b: those cases alone (a machine with more GPUs for fsdp2, say)
  case ",${LEDGER_ONLY:-$name}," in *",$name,"*) ;; *) return ;; esac
  if [ "$t" -lt 10 ]; then echo "== $name: skipped (budget spent)"; return; fi
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" > "$o/$name.log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s"; grep -E '^ledger_prog|Error|error' "$o/$name.log" | tail -n 14
}
# NAME SECONDS -- COMMAND...: under gpumem-tui run --json, the agent keeping its ring for save_ring.
record() {
  local name=$1 t=$2; shift 3
  step "$name" "$t" env GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR="$tmp/agents" GPUMEM_TUI_RING_CAPACITY=262144 \
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" TORCHINDUCTOR_CACHE_DIR="$tmp/inductor" TRITON_CACHE_DIR="$tmp/triton" \
    bun src/cli.ts run --json --interval 500 --output "$o/$name.run.ndjson" -- "$@"
}
prog="python3 test/gpu/ledger_prog.py"
{ nvidia-smi -L; python3 -c 'import torch, pynvml, sys; print(sys.version.split()[0], torch.__version__, pynvml.nvmlSystemGetDriverVersion() if not pynvml.nvmlInit() else "")'; git log -1 --format='tree %h %s' 2>/dev/null | cut -c1-100; } > "$o/machine.txt" 2>&1
cat "$o/machine.txt"
step bare-plain 40 $prog --case bare --out "$o" --name bare-plain --pause 0
record bare 40 -- $prog --case bare --out "$o" --name bare --pause 1.0
record gpt2 60 -- $prog --case gpt2 --out "$o" --name gpt2 --pause 0.8
record rawmalloc 45 -- $prog --case rawmalloc --out "$o" --name rawmalloc --pause 1.0
record nccl 60 -- python3 -m torch.distributed.run --standalone --nproc-per-node=1 test/gpu/ledger_prog.py --case nccl --out "$o" --name nccl --pause 1.0
record compile 90 -- $prog --case compile --out "$o" --name compile --pause 0.6
# LEDGER_NPROC: ranks (one per GPU; each rank's files NAME.rankN.*)
record fsdp2 70 -- python3 -m torch.distributed.run --standalone --nproc-per-node="${LEDGER_NPROC:-1}" test/gpu/ledger_prog.py --case fsdp2 --out "$o" --name fsdp2 --pause 0.8
# The GPT-2 started without the monitor, attached after its second step (the ledger from the attach
# on: the context it had before is the process's NVML less what the seed says torch reserved), the
# monitor's --json beside it until it ends.
attach_gpt2() {
  local ready=$tmp/attach.ready
  env GPUMEM_TUI_DIR="$tmp/agents" GPUMEM_TUI_KEEP=1 $prog --case gpt2 --steps 8 --ready "$ready" --out "$o" --name attach-gpt2 --pause 0.8 &
  local pid=$!
  for _ in $(seq 1 600); do [ -e "$ready" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  GPUMEM_TUI_DIR="$tmp/agents" bun src/cli.ts attach "$pid" --no-monitor --timeout 30; echo "attach: exit $?"
  GPUMEM_TUI_DIR="$tmp/agents" bun src/cli.ts --json --interval 500 > "$o/attach-gpt2.run.ndjson" &
  local mon=$!
  sleep 1.5
  touch "$ready.go"
  wait "$pid"; echo "program: exit $?"
  kill -INT "$mon"; wait "$mon"
}
export -f attach_gpt2
export o tmp prog
step attach-gpt2 75 bash -c attach_gpt2
for f in "$o"/*.ring "$o"/*.ndjson; do [ -f "$f" ] && gzip -9 -f "$f"; done
# The checks, from the facts alone (the ground truth): each event's outside-torch delta; the raw
# allocation within 2 MiB of its size; the bare context; and, where the documents carry a ledger,
# whether its rows sum to NVML used at every sample.
timeout -k 5 30 python3 - "$o" <<'EOF' | tee "$o/summary.txt"
import glob, gzip, json, os, sys
o = sys.argv[1]
MiB = 1 << 20
for path in sorted(glob.glob(os.path.join(o, "*.facts.json"))):
    try:
        f = json.load(open(path))
    except Exception as e:
        print("%s: unreadable (%s)" % (os.path.basename(path), e)); continue
    name = os.path.basename(path)[:-len(".facts.json")]
    if "samples" not in f:
        print("%s: torch's facts only (no NVML samples)" % name); continue
    print("%s: error %s, context (NVML - reserved at first sample) %s MiB, agent %s" % (
        name, f.get("error"), None if f.get("context_bytes") is None else round(f["context_bytes"] / MiB, 1), f.get("agent_mode") or f.get("agent")))
    for e in f.get("events", []):
        d = e.get("outside_delta")
        line = "  %-28s outside torch %+9.1f MiB" % (e["name"], (d or 0) / MiB)
        if "expected_bytes" in e and d is not None:
            line += "  expected %+.1f MiB: %s" % (e["expected_bytes"] / MiB, "WITHIN 2 MiB" if abs(d - e["expected_bytes"]) <= 2 * MiB else "OFF")
        print(line)
    late = name.startswith("attach-")  # the monitor first saw it after it ran
    nd = os.path.join(o, name + ".run.ndjson.gz")
    if not os.path.exists(nd):  # a rank's facts (NAME.rankN): the job's documents, this rank's pid in them
        nd = os.path.join(o, name.split(".rank")[0] + ".run.ndjson.gz")
    if os.path.exists(nd):
        n = rows = bad = 0
        last = None
        peak = {}  # each ledger row's largest bytes over the run
        gpu_bad = 0
        for line in gzip.open(nd, "rt"):
            try:
                doc = json.loads(line)
            except Exception:
                continue
            for d in doc.get("devices", []):
                gl = d.get("ledger")
                if gl and sum(r["bytes"] for r in gl["rows"]) != gl["total_bytes"]:
                    gpu_bad += 1
            for p in doc.get("processes", []):
                if p.get("pid") != f.get("pid") and p.get("agent_pid") != f.get("pid"):
                    continue
                n += 1
                led = (p.get("pytorch") or {}).get("ledger")
                if led and p.get("used_bytes") is not None:
                    rows += 1
                    last = led
                    if sum(r["bytes"] for r in led.get("rows", [])) != p["used_bytes"]:
                        bad += 1
                    for r in led["rows"]:
                        k = r["kind"] + ":" + r["name"]
                        peak[k] = max(peak.get(k, r["bytes"]), r["bytes"])
        print("  documents: %d samples of the process, %d with a ledger, %d whose rows do not sum to NVML used; %d GPU ledgers off their total" % (n, rows, bad, gpu_bad))
        if last:
            print("  last ledger: " + "; ".join("%s %.1f MiB%s" % (r["name"], r["bytes"] / MiB, " (%s)" % r["note"] if r.get("note") and r["kind"] == "library" else "") for r in last["rows"]))
            for j in last.get("jumps", []):
                print("  jump: %+.1f MiB after %s" % (j["bytes"] / MiB, j["after"]))
            # The context row (with any growth as kernels loaded) against the program's own figure.
            ctx = next((r for r in last["rows"] if r["kind"] == "context"), None)
            if ctx and f.get("context_bytes") is not None and late:
                # Attached after step 2: the monitor's first sample holds the context and what the
                # steps before loaded (cuBLAS workspaces, kernels), which it cannot tell apart. The
                # row must say so (never the bare context's name); its size is the program's own
                # context with its outside-torch growth up to the attach.
                names = [e["name"] for e in f.get("events", [])]
                before = sum((e.get("outside_delta") or 0) for e in f["events"][: names.index("step2") + 1]) if "step2" in names else 0
                want = f["context_bytes"] + before
                honest = ctx["name"] != "CUDA context" and "before the monitor saw the process" in ctx["name"]
                print("  context row '%s' %.1f MiB (%s): %s; the program's own context %.1f MiB with its outside-torch growth up to the attach %+.1f MiB = %.1f MiB: %s" % (
                    ctx["name"], ctx["bytes"] / MiB, ctx.get("note"), "HONEST LABEL" if honest else "PRESENTED AS THE CONTEXT: FAIL",
                    f["context_bytes"] / MiB, before / MiB, want / MiB, "WITHIN 2 MiB" if abs(ctx["bytes"] - want) <= 2 * MiB else "OFF"))
            elif ctx and f.get("context_bytes") is not None:
                print("  context row %.1f MiB (%s); the program's own NVML - reserved after torch.zeros(1): %.1f MiB: %s" % (
                    ctx["bytes"] / MiB, ctx.get("note"), f["context_bytes"] / MiB, "WITHIN 2 MiB" if abs(ctx["bytes"] - f["context_bytes"]) <= 2 * MiB else "OFF"))
            pools = [r for r in last["rows"] if r["kind"] == "private_pool"]
            if name == "compile" or pools:
                print("  private pools: %s" % ("; ".join("%s %.1f MiB (%s)" % (r["name"], r["bytes"] / MiB, r.get("note")) for r in pools) or "NONE"))
        for k, v in sorted(peak.items()):
            if k.startswith("library:") or k.startswith("context:"):
                line = "  largest %s: %.1f MiB" % (k, v / MiB)
                raw = next((e for e in f.get("events", []) if "expected_bytes" in e and e["expected_bytes"] > 0), None)
                if raw and k == "library:CUDA runtime":
                    line += " against %.1f MiB asked: %s" % (raw["expected_bytes"] / MiB, "WITHIN 2 MiB" if abs(v - raw["expected_bytes"]) <= 2 * MiB else "OFF")
                if k.startswith("context:") and name != "bare-plain" and not late:
                    bare = os.path.join(o, "bare-plain.facts.json")
                    if os.path.exists(bare):
                        bc = json.load(open(bare)).get("context_bytes")
                        if bc:
                            line += " (a bare torch.zeros(1) process: %.1f MiB)" % (bc / MiB)
                print(line)
EOF
du -sh "$o" | cut -f1 | sed 's/^/ledger: /'
echo "ledger: $((SECONDS - start)) s"
