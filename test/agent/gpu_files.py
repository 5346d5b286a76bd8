"""The agent's files with real torch on a GPU (issue 24, items 2 and 3): what test_files.py checks
without torch, here through a real training (test/agent/scenarios.py). Needs root (tmpfs mounts).

    sudo PYTHONPATH=agent python3 test/agent/gpu_files.py      # one JSON line per case; exit 0: all held

Cases: a ring on a 4 MiB tmpfs (smaller, the training unharmed, totals equal torch's); on a 192 KiB
tmpfs (no records: polling, said); a hook cache others can write (not loaded: polling, said); the
hook loaded through its checked descriptor (hook mode); a dump into a shared directory where a link
was planted at the old temporary name (the link's target untouched, the snapshot whole).
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCENARIOS = os.path.join(HERE, "scenarios.py")
failed = []


def scenario(name, env, *args):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "agent"), **env)
    p = subprocess.run([sys.executable, SCENARIOS, name, *args], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    report = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
    return p.returncode, report, p.stderr[-2000:]


def check(case, ok, **facts):
    print(json.dumps(dict(case=case, ok=bool(ok), **facts)), flush=True)
    if not ok:
        failed.append(case)


def tmpfs(size):
    d = tempfile.mkdtemp(prefix="gpumem-gpu-files-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", d], check=True)
    return d


def umount(d):
    subprocess.run(["umount", "-l", d])
    shutil.rmtree(d, ignore_errors=True)


def small_tmpfs():
    d = tmpfs("4m")
    try:
        rc, r, err = scenario("normal", {"GPUMEM_TUI_DIR": os.path.join(d, "agents")}, "--steps", "3")
        notes = r and r["manifest"]["notes"]
        same = r and r["header"]["totals"]["allocated"] == r["torch"]["memory_allocated"]
        check("ring on a 4 MiB tmpfs: smaller, training unharmed, totals exact", rc == 0 and r["manifest"]["hook_mode"] == "hook"
              and notes.get("ring", "").startswith("ring made smaller") and same, rc=rc, notes=notes, err=None if rc == 0 else err)
    finally:
        umount(d)


def tiny_tmpfs():
    d = tmpfs("192k")
    try:
        rc, r, err = scenario("normal", {"GPUMEM_TUI_DIR": os.path.join(d, "agents")}, "--steps", "3")
        notes = r and r["manifest"]["notes"]
        check("ring on a 192 KiB tmpfs: no records, polling, said", rc == 0 and r["manifest"]["hook_mode"] == "polling"
              and notes.get("ring", "").startswith("no event records") and r["header"]["records"] == 0,
              rc=rc, notes=notes, hook_error=r and r["manifest"]["hook_error"], err=None if rc == 0 else err)
    finally:
        umount(d)


def open_cache():
    home = tempfile.mkdtemp(prefix="gpumem-gpu-cache-")
    os.mkdir(os.path.join(home, "gpumem-tui"))
    os.chmod(os.path.join(home, "gpumem-tui"), 0o775)
    agents = tempfile.mkdtemp(prefix="gpumem-gpu-agents-")
    try:
        rc, r, err = scenario("normal", {"XDG_CACHE_HOME": home, "GPUMEM_TUI_DIR": os.path.join(agents, "a")}, "--steps", "2")
        why = r and r["manifest"]["hook_error"]
        check("a hook cache others can write: not loaded, polling, what to fix said", rc == 0 and r["manifest"]["hook_mode"] == "polling"
              and "writable by other users (mode 775)" in (why or "") and "rm -r" in why, rc=rc, hook_error=why, err=None if rc == 0 else err)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(agents, ignore_errors=True)


def hook_loaded():
    agents = tempfile.mkdtemp(prefix="gpumem-gpu-agents-")
    try:
        rc, r, err = scenario("normal", {"GPUMEM_TUI_DIR": os.path.join(agents, "a")}, "--steps", "3")
        check("the hook loaded through its checked descriptor", rc == 0 and r["manifest"]["hook_mode"] == "hook" and r["header"]["records"] > 0
              and not r["manifest"]["notes"].get("ring"), rc=rc, hook_error=r and r["manifest"]["hook_error"], err=None if rc == 0 else err)
    finally:
        shutil.rmtree(agents, ignore_errors=True)


DUMP = """
import json, os, sys, torch, gpumem_agent
gpumem_agent.attach()
torch.zeros(1 << 20, device="cuda")
a = gpumem_agent.current()
print(json.dumps({"path": a._dump("snapshot", sys.argv[1])}))
"""


def planted_dump():
    shared = tempfile.mkdtemp(prefix="gpumem-gpu-shared-")
    os.chmod(shared, 0o1777)
    victim = os.path.join(tempfile.mkdtemp(prefix="gpumem-gpu-victim-"), "precious")
    with open(victim, "wb") as f:
        f.write(b"precious")
    os.chmod(victim, 0o644)
    path = os.path.join(shared, "monitor-named.pickle")
    os.symlink(victim, path + ".tmp")
    agents = tempfile.mkdtemp(prefix="gpumem-gpu-agents-")
    try:
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "agent"), GPUMEM_TUI_DIR=os.path.join(agents, "a"))
        p = subprocess.run([sys.executable, "-c", DUMP, path], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        with open(victim, "rb") as f:
            untouched = f.read() == b"precious" and (os.stat(victim).st_mode & 0o777) == 0o644
        snap = None
        if p.returncode == 0:
            with open(path, "rb") as f:
                snap = pickle.load(f)
        check("a dump beside a planted link: target untouched, snapshot whole and 0600", p.returncode == 0 and untouched and "segments" in snap
              and (os.lstat(path).st_mode & 0o777) == 0o600, rc=p.returncode, untouched=untouched, err=None if p.returncode == 0 else p.stderr[-2000:])
    finally:
        for d in (shared, os.path.dirname(victim), agents):
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("gpu_files.py: needs root (it mounts small tmpfs filesystems)")
    for case in (hook_loaded, small_tmpfs, tiny_tmpfs, open_cache, planted_dump):
        try:
            case()
        except Exception as e:  # one case's failure is reported, the others still run
            check(case.__name__, False, error="%s: %s" % (type(e).__name__, e))
    sys.exit(1 if failed else 0)
