"""`gpumem-tui attach` to a GPT-2 training started without the monitor, with the mark-every-hook
mode asked in the training's own environment (GPUMEM_TUI_MARKS=hooks: the agent, once injected,
reads the target's environment): the attach recording of issue 36's comparison. Run from the
repository root on a GPU machine (bench/gpu-session.sh part `exact`):

    python3 test/gpu/exact_attach.py --out OUT [--name attach-gpt2] [--steps 4]

Starts test/gpu/exact_train.py --model gpt2 --attach-wait with plain python (no agent on its path),
attaches once it says "ready", and lets it train --steps more steps with the agent in; the training
then saves OUT/NAME.ring (the agent's compact copy), OUT/NAME.json (its manifest, with the seed's
path) and OUT/NAME.facts.json; the seed (the allocator's blocks at the attach) is copied to
OUT/NAME.seed.json, GPUMEM_TUI_KEEP=1 keeping it. Exit status: the training's, or 1 when the attach
failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--name", default="attach-gpt2")
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--wait", type=float, default=150, help="seconds the training waits for the attach")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
work = tempfile.mkdtemp(prefix="gpumem-exact-attach-")
agents = os.path.join(work, "agents")
os.mkdir(agents, 0o700)
env = dict(os.environ, GPUMEM_TUI_DIR=agents, GPUMEM_TUI_MARKS="hooks", GPUMEM_TUI_KEEP="1", GPUMEM_TUI_RING_CAPACITY="524288")
env.pop("PYTHONPATH", None)  # no agent on the training's path: started as a user would
train = subprocess.Popen([sys.executable, "test/gpu/exact_train.py", "--model", "gpt2", "--name", args.name, "--out", args.out,
                          "--steps", str(args.steps), "--attach-wait", str(args.wait)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
status = 1
try:
    # Its stderr comes on the same pipe (transformers' warnings): the lines before "ready" are said.
    pid = None
    for line in train.stdout:
        print(line.rstrip(), flush=True)
        if line.startswith("ready "):
            pid = int(line.split()[1])
            break
    if pid is None:
        sys.exit("the training ended before it was ready (exit %s)" % train.wait())
    t = time.time()
    p = subprocess.run(["bun", "src/cli.ts", "attach", str(pid), "--no-monitor", "--timeout", "60"], env=env,
                       capture_output=True, text=True, timeout=120)
    print("attach: exit %d in %.1f s: %s" % (p.returncode, time.time() - t, (p.stdout + p.stderr).strip()), flush=True)
    for out_line in train.stdout:
        print(out_line.rstrip(), flush=True)
    status = train.wait(timeout=args.wait + 120)
    if p.returncode != 0 and status == 0:
        status = 1
    manifest = os.path.join(args.out, args.name + ".json")
    if os.path.exists(manifest):
        seed = (json.load(open(manifest)).get("seed") or {}).get("path")
        if seed and os.path.exists(seed):
            shutil.copyfile(seed, os.path.join(args.out, args.name + ".seed.json"))
            print("seed: %s copied" % seed, flush=True)
        else:
            print("no seed in the manifest (or it is gone): %r" % seed, flush=True)
finally:
    if train.poll() is None:
        train.kill()
        train.wait()
    shutil.rmtree(work, ignore_errors=True)
sys.exit(status)
