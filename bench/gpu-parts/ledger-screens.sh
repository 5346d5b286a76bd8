#!/usr/bin/env bash
# Issue 40 on the screens, on a GPU: the GPU ledger's rows that no committed recording has (memory
# of a pid the monitor cannot see, another user's) and a job's rank that stands out outside PyTorch.
#   bash bench/gpu-parts/ledger-screens.sh OUT_DIR
# Run from the repository root on the device after `bun cuda/build.ts --install` (bun, tmux on PATH;
# python3 with torch, nvidia-ml-py; root, for unshare and setpriv). Every step under `timeout -k 5`;
# at most 4 minutes in all.
#   container  test/gpu/ledger_hold.py holds 1 GiB; the monitor runs in a pid namespace of its own
#              (unshare --pid --mount-proc: a container's view), where /proc has no such pid:
#              --json --once (container.json), and its screens in tmux at 80x24 and 200x60 (the
#              Overview, then the Findings screen): the GPU's `gone` row and its words
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
sock="gpumem-lscreens-$$"
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
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
  tmux -L "$sock" new-session -d -s "$s" -x "$cols" -y "$rows" "$* env NO_COLOR=1 timeout -k 5 30 bun src/cli.ts; sleep 30" || { echo "== $name: tmux failed"; return; }
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
for case, kind in (("container", "gone"), ("otheruser", "other_users")):
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
            "PASS" if hold["pid"] in r["pids"] or (kind == "gone" and r["bytes"] >= hold["bytes"]) else "FAIL"))
        for w in gl.get("words", []):
            print("  words: " + w)
    for path in sorted(glob.glob(os.path.join(o, case + "-*x*.txt"))):
        text = open(path).read()
        print("  %s: ledger line %s, gone warning %s" % (os.path.basename(path), any(("procs" in l or "memory:" in l) and "free" in l for l in text.split("\n")), "no longer exists" in text))
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
