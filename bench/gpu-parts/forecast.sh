#!/usr/bin/env bash
# Issue 41's ground truth (will it fit: the largest batch, time to OOM) on one GPU, in at most 4 minutes:
#   bash bench/gpu-parts/forecast.sh OUT_DIR        (repo root, after `bun cuda/build.ts --install`)
# Every program caps the caching allocator with torch.cuda.set_per_process_memory_fraction at CAP_GIB
# (24) so that the search is cheap; the cap is in every facts file. test/gpu/forecast_train.py:
#   rings/  under `gpumem-tui run --json` (the agent's compact ring copy kept, gzip -9): NAME.ring.gz,
#           NAME.json (manifest), NAME.facts.json (torch's figures per step), NAME.run.ndjson.gz (the
#           monitor's documents, the last one run --json's):
#           gpt2 (b0 16 x 256), resnet50 (b0 16), gpt2-ckpt (b0 16, activation checkpointing),
#           gpt2-varlen (batch 8, sequence length per step 128..1024, sdpa), gpt2-varlen-eager (the
#           same with eager attention: quadratic in seq), gpt2-leak (batch 8 x 256, every step's
#           logits kept until the allocator raises OOM: the facts' oom_step)
#   forecast.json  the forecast's largest batch from each of the first three rings (forecast-of.ts)
#   sweep.json  plainly: torch's max_memory_allocated at b0, 2b0, 4b0, and for gpt2, resnet50,
#           gpt2-ckpt the largest batch a training started at it runs (`fresh`: each trial a new model
#           and optimizer on an emptied allocator, three steps, from the forecast's batch and one more
#           outward, then halving the gap); peaks per seq for both attentions
#   one-*.json  fresh processes (three steps) at that boundary (largest fit, one more), and at the
#           forecast's batch and one more where they differ, while time is left
#   rings/facts.json  all of it in one file; summary.txt what stdout said
#   acceptance.log  test/profiler/forecast-gpu.test.ts on these rings (issue 41's figures: 2b0, 4b0 within
#           5%, the largest batch within one, the variable-length fit, time to OOM within 10%)
# The fixtures to commit: rings/*.ring.gz, rings/*.json and rings/facts.json into test/fixtures/forecast/.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out/rings"
out=$(cd "$out" && pwd)
export PATH=/tmp/bin:$PATH PYTHONUNBUFFERED=1
cap=${CAP_GIB:-24}
tmp=$(mktemp -d /tmp/gpumem-forecast.XXXXXX)
mkdir -m 700 "$tmp/agents"
deadline=$((SECONDS + ${FORECAST_BUDGET:-205}))
left() { local l=$((deadline - SECONDS)); [ "$l" -lt "$1" ] || l=$1; echo "$l"; }
py=test/gpu/forecast_train.py
step() { # name seconds command...
  local name=$1 t; t=$(left "$2"); shift 2
  if [ "$t" -lt 8 ]; then echo "== $name: skipped (the 4 minutes are spent)"; return; fi
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" > "$out/$name.log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s"; grep -E '^(forecast_train|sweep|shapes)|Error|error' "$out/$name.log" | tail -n 4
}
ring() { # name seconds forecast_train args...
  local name=$1 t=$2; shift 2
  step "ring-$name" "$t" env GPUMEM_TUI_KEEP=1 GPUMEM_TUI_DIR="$tmp/agents" GPUMEM_TUI_RING_CAPACITY=524288 \
    CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}" \
    bun src/cli.ts run --json --output "$out/rings/$name.run.ndjson" -- \
    python3 "$py" ring --out "$out/rings" --name "$name" --cap-gib "$cap" "$@"
}
{ nvidia-smi -L; python3 -c 'import torch, transformers, torchvision, sys; print(sys.version.split()[0], torch.__version__, transformers.__version__, torchvision.__version__)'; git log -1 --format=%h; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
# In the order of what matters most should time run out; the first also builds the hook.
ring gpt2 90 --model gpt2 --batch 16 --steps 4
ring resnet50 45 --model resnet50 --batch 16 --steps 4
ring gpt2-ckpt 40 --model gpt2-ckpt --batch 16 --steps 4
ring gpt2-leak 45 --leak --model gpt2 --batch 8 --steps 400
ring gpt2-varlen 40 --model gpt2 --batch 8 --seqs 256,1024,128,768,512,384,1024,256 --steps 8
# The forecast from the rings just made: where the search for what a fresh training runs starts.
timeout -k 5 20 bun bench/gpu-parts/forecast-of.ts "$out/rings" gpt2 resnet50 gpt2-ckpt > "$out/forecast.json" 2> "$out/forecast-of.log"
echo "== forecast: $(cat "$out/forecast.json" 2>/dev/null) $(tail -n 2 "$out/forecast-of.log" 2>/dev/null)"
fc() { python3 -c "import json,sys; v=(json.load(open('$out/forecast.json')).get('$1') or {}).get('max_batch'); print(v if isinstance(v, int) and v > 0 else '')" 2>/dev/null; }
hints=$(for m in gpt2 resnet50 gpt2-ckpt; do f=$(fc "$m"); [ -n "$f" ] && printf '%s=%s,' "$m" "$f"; done)
step sweep 85 python3 "$py" sweep --out "$out" --cap-gib "$cap" --b0 16 --var-batch 8 --seqs 128,256,384,512,768,1024 --budget 72 --bisect-budget 18 ${hints:+--hints "${hints%,}"}
ring gpt2-varlen-eager 40 --model gpt2 --attn eager --batch 8 --seqs 256,1024,128,768,512,384,1024,256 --steps 8
# The fresh search's boundary in new processes (the ground truth: a training started at that batch;
# the search's trials began at the forecast's batch and one more), then the forecast's batch where
# it differs; GPT-2's first: ResNet50's boundary was checked on 2026-11-29.
fresh() { python3 -c "import json,sys; print(json.load(open('$out/sweep.json'))['models']['$1']['fresh']['largest_fit'] or '')" 2>/dev/null; }
for which in fresh fc; do
  for m in gpt2 gpt2-ckpt resnet50; do
    b=$($which "$m")
    for n in ${b:+$b $((b + 1))}; do
      [ "$n" -gt 0 ] && [ ! -f "$out/one-$m-$n.json" ] || continue
      step "one-$m-$n" 25 python3 "$py" one --model "$m" --batch "$n" --steps 3 --cap-gib "$cap" --result "$out/one-$m-$n.json"
    done
  done
done
for f in "$out"/rings/*.ring "$out"/rings/*.ndjson; do [ -f "$f" ] && gzip -9 -f "$f"; done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
load = lambda p: json.load(open(p))
facts = {"rings": {}, "sweep": None, "one": {}}
for p in sorted(glob.glob(os.path.join(out, "rings", "*.facts.json"))):
    facts["rings"][os.path.basename(p)[:-len(".facts.json")]] = load(p)
if os.path.exists(os.path.join(out, "sweep.json")):
    facts["sweep"] = load(os.path.join(out, "sweep.json"))
for p in sorted(glob.glob(os.path.join(out, "one-*.json"))):
    facts["one"][os.path.basename(p)[4:-5]] = load(p)
json.dump(facts, open(os.path.join(out, "rings", "facts.json"), "w"), indent=1)
G = 1 << 30
for name, f in facts["rings"].items():
    last = [s for s in f["per_step"] if not s.get("oom")][-1:] or [{}]
    print("ring %-18s steps %3s oom_step %-4s peak %.3f GiB boundary %.3f GiB records %s lapped %s outside %s" % (
        name, f["steps_done"], f["oom_step"], f["max_memory_allocated"] / G, last[0].get("allocated", 0) / G,
        f.get("records"), f.get("ring_lapped"), f.get("outside_pytorch")))
s = facts["sweep"] or {"models": {}, "shapes": {}}
fc = load(os.path.join(out, "forecast.json")) if os.path.exists(os.path.join(out, "forecast.json")) else {}
for m, e in s["models"].items():
    peaks = {b: round(r["peaks"][-1]["max_allocated"] / G, 3) if r["peaks"] else "OOM" for b, r in e["batches"].items()}
    fr = e.get("fresh") or {}
    print("sweep %-9s peaks(GiB) %s forecast %s; fresh largest fit %s first fail %s complete %s (%s); in-process %s/%s" % (
        m, peaks, (fc.get(m) or {}).get("max_batch"), fr.get("largest_fit"), fr.get("first_fail"), fr.get("complete"),
        " ".join("%d%s" % (t["batch"], "" if t["fits"] else "x") for t in fr.get("trials", [])), e.get("largest_fit"), e.get("first_fail")))
for a, e in s["shapes"].items():
    if "per_seq" in e:
        print("shapes %-5s batch %d: %s" % (a, e["batch"], {q: round(r["peaks"][-1]["max_allocated"] / G, 3) if r["peaks"] else "OOM" for q, r in e["per_seq"].items()}))
for k, r in facts["one"].items():
    print("one %-16s fits %s" % (k, r.get("fits")))
print("cap", (s.get("cap") or {}))
PY
rm -rf "$tmp"
# The forecast made from these rings against the figures measured here (the test skips what is missing).
t=$((240 - SECONDS - 5)); [ "$t" -ge 10 ] || t=10; [ "$t" -le 60 ] || t=60
timeout -k 5 "$t" env GPUMEM_FORECAST_FIXTURES="$out/rings" bun test test/profiler/forecast-gpu.test.ts > "$out/acceptance.log" 2>&1
echo "== acceptance: exit $?"; grep -E '^\((pass|fail|skip)\)|^ *[0-9]+ (pass|fail|skip)' "$out/acceptance.log" | cut -c1-200
du -sh "$out"; ls -la "$out" "$out/rings"
