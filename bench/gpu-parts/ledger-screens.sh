#!/usr/bin/env bash
# Issue 40 on the screens, on a GPU: the GPU ledger's rows that no committed recording has (memory
# of a pid the monitor cannot see, another user's) and a job's rank that stands out outside PyTorch.
#   bash bench/gpu-parts/ledger-screens.sh OUT_DIR
# Run from the repository root on the device after `bun cuda/build.ts --install` (bun, tmux on PATH;
# python3 with torch, nvidia-ml-py; root, for unshare and setpriv). Every step under `timeout -k 5`;
# at most 4 minutes in all.
#   container  test/gpu/ledger_hold.py holds 1 GiB; the monitor runs in a pid namespace of its own
#              (unshare --pid --mount-proc: a container's view), where the driver lists NVML no
#              process outside it: --json --once (container.json), and its screens in tmux at 80x24
#              and 200x60 (the Overview, then the Findings screen): the holder's memory in the GPU's
#              `not_listed` row, container_view true, the line's "outside container" words
#   gone       test/gpu/ledger_gone.py: a process makes a CUDA context holding 512 MiB, forks a
#              keeper that never touches CUDA but keeps the inherited /dev/nvidia* descriptors open,
#              and leaves with os._exit; NVML's process list then (gone-nvml.json: each pid listed,
#              whether /proc has it) beside the monitor's --json --once (gone.json) and its screens
#              at 80x24 and 200x60: whatever NVML lists is recorded; where it lists the owner's pid,
#              the GPU's `gone` row holds it, with its warning; the list again once the keeper is
#              stopped (gone-after-nvml.json)
#   otheruser  the same holder run as nobody (setpriv): --json --once (otheruser.json), the screens
#              at 80x24: the `other_users` row
#   ranks      (two GPUs or more) test/gpu/ledger_ranks.py under torchrun and `run --json`: rank 0
#              makes single-rank NCCL communicators and a raw 512 MiB cudaMalloc; the job's
#              outside_rank, its note, each rank's outside bytes (ranks.run.ndjson.gz, the facts)
# OUT_DIR/ledger-screens/: the documents, NAME-COLSxROWS.txt screens, logs, summary.txt (on stdout).
set -u
out=${1:?OUT_DIR}
o=$out/ledger-screens
mkdir -p "$o"
export PYTHONUNBUFFERED=1
start=$SECONDS
budget=${LEDGER_SCREENS_BUDGET:-220}
tmp=$(mktemp -d /tmp/gpumem-lscreens.XXXXXX)
shared=$(mktemp -d /tmp/gpumem-lscreens-shared.XXXXXX) # nobody's holder writes its ready file here
chmod 1777 "$shared"
holder=""
keeper=""
sock="gpumem-lscreens-$$"
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  [ -n "$keeper" ] && kill "$keeper" 2>/dev/null
  tmux -L "$sock" kill-server 2>/dev/null
  rm -rf "$tmp" "$shared"
}
trap cleanup EXIT
left() { local l=$((budget - (SECONDS - start))); [ "$l" -lt "$1" ] || l=$1; echo "$l"; }
# wait_file PATH SECONDS: until PATH exists (the holder's ready file), or the time is up.
wait_file() { local i=0; while [ ! -s "$1" ] && [ "$i" -lt $(($2 * 5)) ]; do sleep 0.2; i=$((i + 1)); done; [ -s "$1" ]; }
# hold NAME [RUNNER...]: the holder started in the background (pid in $holder), ready or not.
hold() {
  local name=$1; shift
  "$@" timeout -k 5 "$(left 90)" python3 test/gpu/ledger_hold.py --bytes $((1 << 30)) --ready "$shared/$name.ready" --seconds 80 > "$o/$name-holder.log" 2>&1 &
  holder=$!
  if wait_file "$shared/$name.ready" 60; then cp "$shared/$name.ready" "$o/$name-holder.json"; echo "== $name: holder $(cat "$shared/$name.ready")"; else echo "== $name: holder never ready"; tail -n 5 "$o/$name-holder.log"; fi
}
unhold() { [ -n "$holder" ] && kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; holder=""; }
# screens NAME COLS ROWS PREFIX...: the monitor's Overview, then its Findings screen, in tmux.
screens() {
  local name=$1 cols=$2 rows=$3; shift 3
  local s="$name-$cols"
  tmux -L "$sock" new-session -d -s "$s" -x "$cols" -y "$rows" "$* env NO_COLOR=1 timeout --foreground -k 5 30 bun src/cli.ts; sleep 30" || { echo "== $name: tmux failed"; return; }
  sleep 6
  tmux -L "$sock" capture-pane -p -t "$s" > "$o/$name-${cols}x$rows.txt"
  tmux -L "$sock" send-keys -t "$s" 6; sleep 1.5
  tmux -L "$sock" capture-pane -p -t "$s" > "$o/$name-findings-${cols}x$rows.txt"
  tmux -L "$sock" send-keys -t "$s" q; sleep 0.5
  tmux -L "$sock" kill-session -t "$s" 2>/dev/null
}
{ nvidia-smi -L; git log -1 --format='tree %h %s' 2>/dev/null | cut -c1-100; } > "$o/machine.txt" 2>&1
cat "$o/machine.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# A container's view: the monitor in a pid namespace of its own, the holder outside it.
ns="unshare --pid --fork --mount-proc"
hold container
timeout -k 5 "$(left 30)" $ns bun src/cli.ts --json --once > "$o/container.json" 2> "$o/container.err"; echo "== container --json --once: exit $?"
screens container 80 24 $ns
screens container 200 60 $ns
unhold

# Memory held for a process that no longer exists: its keeper child holds the context's descriptors.
# nvml_now FILE: NVML's compute processes on every GPU, each with whether /proc has it and its state.
nvml_now() {
  timeout -k 5 20 python3 - "$1" <<'PY'
import json, sys, pynvml
pynvml.nvmlInit()
out = []
for i in range(pynvml.nvmlDeviceGetCount()):
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i)):
        state = None
        try:
            state = [l.split(":", 1)[1].strip() for l in open("/proc/%d/status" % p.pid) if l.startswith("State:")][0]
        except OSError:
            pass
        out.append({"device": i, "pid": int(p.pid), "used_bytes": None if p.usedGpuMemory is None else int(p.usedGpuMemory), "proc_state": state})
json.dump(out, open(sys.argv[1], "w"))
print("NVML lists: " + ("; ".join("GPU %d pid %d %s MiB (%s)" % (o["device"], o["pid"], None if o["used_bytes"] is None else o["used_bytes"] >> 20, o["proc_state"] or "no such process") for o in out) or "no process"))
PY
}
if [ "$(left 60)" -ge 40 ]; then
  timeout -k 5 "$(left 60)" python3 test/gpu/ledger_gone.py --ready "$shared/gone.ready" --bytes $((512 << 20)) --seconds 70 > "$o/gone-owner.log" 2>&1
  if wait_file "$shared/gone.ready" 60 && grep -q '"error": null' "$shared/gone.ready"; then
    cp "$shared/gone.ready" "$o/gone-owner.json"; echo "== gone: $(cat "$shared/gone.ready")"
    keeper=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("keeper") or "")' "$shared/gone.ready")
    sleep 2 # the owner has left and been reaped by init
    echo "== gone: $(nvml_now "$o/gone-nvml.json")"
    timeout -k 5 "$(left 30)" bun src/cli.ts --json --once > "$o/gone.json" 2> "$o/gone.err"; echo "== gone --json --once: exit $?"
    screens gone 80 24
    screens gone 200 60
    [ -n "$keeper" ] && kill "$keeper" 2>/dev/null; keeper=""
    sleep 2
    echo "== gone, keeper stopped: $(nvml_now "$o/gone-after-nvml.json")"
  else
    [ -f "$shared/gone.ready" ] && cp "$shared/gone.ready" "$o/gone-owner.json"
    echo "== gone: owner never ready: $(cat "$shared/gone.ready" 2>/dev/null)"; tail -n 5 "$o/gone-owner.log"
  fi
else
  echo "== gone: skipped (budget spent)"
fi

# Another user's process.
mkdir -p "$shared/home" && chmod 777 "$shared/home"
hold otheruser setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$shared/home"
timeout -k 5 "$(left 30)" bun src/cli.ts --json --once > "$o/otheruser.json" 2> "$o/otheruser.err"; echo "== otheruser --json --once: exit $?"
screens otheruser 80 24
unhold

# A job whose rank 0 holds more outside PyTorch.
if [ "$gpus" -ge 2 ] && [ "$(left 90)" -ge 40 ]; then
  t0=$SECONDS
  timeout -k 5 "$(left 90)" env GPUMEM_TUI_DIR="$tmp" bun src/cli.ts run --json --interval 500 --output "$o/ranks.run.ndjson" -- \
    python3 -m torch.distributed.run --standalone --nproc-per-node=2 test/gpu/ledger_ranks.py --out "$o" --seconds 20 > "$o/ranks.log" 2>&1
  echo "== ranks: exit $? in $((SECONDS - t0)) s"; grep -E 'Error|error' "$o/ranks.log" | tail -n 8
  [ -f "$o/ranks.run.ndjson" ] && gzip -9 -f "$o/ranks.run.ndjson"
else
  echo "== ranks: skipped ($gpus GPU(s); two needed, or the budget spent)"
fi

timeout -k 5 30 python3 - "$o" <<'PY' | tee "$o/summary.txt"
import glob, gzip, json, os, sys
o = sys.argv[1]
MiB = 1 << 20
def load(name):
    try:
        return json.load(open(os.path.join(o, name)))
    except Exception as e:
        print("%s: unreadable (%s)" % (name, e)); return None
for case, kind in (("container", "not_listed"), ("otheruser", "other_users")):
    doc, hold = load(case + ".json"), load(case + "-holder.json")
    if not doc or not hold:
        continue
    for d in doc.get("devices", []):
        gl = d.get("ledger")
        if not gl:
            print("%s: GPU %s has no ledger" % (case, d.get("index"))); continue
        rows = {r["kind"]: r for r in gl["rows"]}
        ok = sum(r["bytes"] for r in gl["rows"]) == gl["total_bytes"]
        r = rows.get(kind, {"bytes": 0, "pids": []})
        print("%s: GPU %s rows %s; sum to total %s; %s %.1f MiB pids %s (holder pid %s, NVML %s MiB): %s" % (
            case, d["index"], ", ".join("%s %.1f MiB" % (k, v["bytes"] / MiB) for k, v in rows.items()), "YES" if ok else "NO",
            kind, r["bytes"] / MiB, r["pids"], hold["pid"], None if hold.get("nvml_used_bytes") is None else round(hold["nvml_used_bytes"] / MiB, 1),
            # In a container the driver lists NVML no process outside it: the holder's memory is
            # in not_listed (no pid), said as outside the container's view.
            "PASS" if hold["pid"] in r["pids"] or (kind == "not_listed" and r["bytes"] >= (hold.get("nvml_used_bytes") or hold["bytes"]) and gl.get("container_view") is True) else "FAIL"))
        for w in gl.get("words", []):
            print("  words: " + w)
    for path in sorted(glob.glob(os.path.join(o, case + "-*x*.txt"))):
        text = open(path).read()
        print("  %s: ledger line %s, gone warning %s, outside-container words %s" % (os.path.basename(path), any(("procs" in l or "memory:" in l) and "free" in l for l in text.split("\n")), "no longer exists" in text, "outside container" in text or "outside this container's view" in text))
# The gone case: what NVML listed once the owner left, and what the monitor made of it.
owner = load("gone-owner.json") if os.path.exists(os.path.join(o, "gone-owner.json")) else None
listed = load("gone-nvml.json") if owner else None
doc = load("gone.json") if owner else None
if owner and owner.get("error"):
    print("gone: the owner failed: %s" % owner["error"])
elif owner and listed is not None and doc:
    if True:
        mine = [p for p in listed if p["pid"] == owner["owner"]]
        print("gone: owner pid %s (keeper %s) held %.1f MiB; after it left NVML listed %s" % (
            owner["owner"], owner["keeper"], owner["bytes"] / MiB,
            "its pid (%s; /proc: %s)" % (", ".join("%s MiB" % (p["used_bytes"] >> 20 if p["used_bytes"] is not None else None) for p in mine), mine[0]["proc_state"] or "no such process") if mine else
            "not its pid (pids listed: %s)" % ([p["pid"] for p in listed] or "none")))
        for d in doc.get("devices", []):
            gl = d.get("ledger") or {}
            rows = {r["kind"]: r for r in gl.get("rows", [])}
            g = rows.get("gone", {"bytes": 0, "pids": []})
            ok = "PASS" if owner["owner"] in g["pids"] else ("n/a (NVML did not list the owner's pid)" if not mine else "FAIL")
            print("gone: GPU %s rows %s; gone %.1f MiB pids %s: %s" % (d["index"], ", ".join("%s %.1f MiB" % (k, v["bytes"] / MiB) for k, v in rows.items()), g["bytes"] / MiB, g["pids"], ok))
            for w in gl.get("words", []):
                print("  words: " + w)
        for path in sorted(glob.glob(os.path.join(o, "gone-*x*.txt"))):
            text = open(path).read()
            print("  %s: gone on the line %s, warning %s" % (os.path.basename(path), "gone" in text, "no longer exists" in text))
    after = load("gone-after-nvml.json")
    if after is not None:
        print("gone: with the keeper stopped NVML lists the owner's pid: %s" % any(p["pid"] == owner["owner"] for p in after))
nd = os.path.join(o, "ranks.run.ndjson.gz")
if os.path.exists(nd):
    last = None
    for line in gzip.open(nd, "rt"):
        try:
            doc = json.loads(line)
        except Exception:
            continue
        if doc.get("jobs"):
            last = doc
    if not last:
        print("ranks: no document with a job")
    else:
        j = last["jobs"][0]
        print("ranks: outside_rank %s margin %s MiB part %s" % (j.get("outside_rank"), None if j.get("outside_margin_bytes") is None else round(j["outside_margin_bytes"] / MiB, 1), j.get("outside_part")))
        for r in j["ranks"]:
            print("  rank %s outside %s MiB" % (r["rank"], None if r.get("outside_pytorch_bytes") is None else round(r["outside_pytorch_bytes"] / MiB, 1)))
    for path in sorted(glob.glob(os.path.join(o, "ranks.facts.*.json"))):
        f = json.load(open(path))
        print("  facts rank %s: " % f["rank"] + "; ".join("%s NVML-reserved %s MiB" % (e["name"], None if e["nvml_used"] is None else round((e["nvml_used"] - e["reserved"]) / MiB, 1)) for e in f["events"]))
PY
du -sh "$o" | cut -f1 | sed 's/^/ledger-screens: /'
echo "ledger-screens: $((SECONDS - start)) s"
