"""attach_running (agent/gpumem_agent/attaching.py) without torch: the token's checks, the result
file, the seed's split, and a whole attach, detach and attach again inside a running program on
the doubles (test/agent/attach_target.py), and the header's reserved around the attach
(test/agent/attach_totals.py). Run by test/agent/attach.test.ts (it builds the hook
double and passes it in GPUMEM_TEST_HOOK_DOUBLE)."""
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))

from gpumem_agent import attaching as attach  # noqa: E402
from gpumem_agent.attaching import check_token, claim_token, write_error  # noqa: E402
from gpumem_agent.seed import ALLOC, FREE_REQUESTED, SEGMENT_ALLOC, split_point  # noqa: E402


def token(d, name="attach-1", mode=0o600, text=b"{}", age=0.0):
    path = os.path.join(d, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, text)
    os.close(fd)
    os.chmod(path, mode)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return path


class Token(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()

    def test_a_fresh_private_token_of_ours_is_taken_with_its_options(self):
        opts, why = check_token(token(self.d, text=b'{"monitor_pid": 1}'))
        self.assertIsNone(why)
        self.assertEqual(opts, {"monitor_pid": 1})
        # the monitor's own token (secret and deadline, checked by the bootstrap): no options
        self.assertEqual(check_token(token(self.d, "t1", text=b"0123abcd 1790000000000\n")), ({}, None))

    def test_anything_else_is_refused_in_words(self):
        cases = {
            "missing": (os.path.join(self.d, "nothing"), "no token"),
            "open to others": (token(self.d, "t2", mode=0o644), "mode 644"),
            "stale": (token(self.d, "t3", age=120), "stale"),
            "not JSON": (token(self.d, "t4", text=b"{"), "JSON"),
            "too large": (token(self.d, "t6", text=b" " * 5000), "larger"),
        }
        link = os.path.join(self.d, "link")
        os.symlink(token(self.d, "t7"), link)
        cases["a link"] = (link, "not a regular file")
        cases["relative"] = ("attach-1", "absolute")
        for what, (path, words) in cases.items():
            opts, why = check_token(path)
            self.assertIsNone(opts, what)
            self.assertIn(words, why, what)
        self.assertIn("belongs to uid", check_token(token(self.d, "t8"), uid=os.getuid() + 1)[1])

    def test_claimed_once_a_token_claimed_by_the_bootstrap_is_gone(self):
        t = token(self.d)
        self.assertEqual(claim_token(t), ({}, None))
        self.assertFalse(os.path.exists(t))  # claimed: removed
        self.assertEqual(claim_token(t), ({}, None))  # gone: the bootstrap claimed it
        bad = token(self.d, "t2", mode=0o644)
        self.assertIsNone(claim_token(bad)[0])
        self.assertTrue(os.path.exists(bad))  # not ours to take

    def test_the_refusal_is_created_once_private_and_never_through_a_link(self):
        t = token(self.d)
        path = write_error(t, "CUDA is not\ninitialized")
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o600)
        self.assertIsNone(write_error(t, "other"))  # exclusive: the first answer stands
        with open(path) as f:
            self.assertEqual(f.read(), "CUDA is not initialized\n")
        victim = os.path.join(self.d, "victim")
        open(victim, "w").close()
        t2 = token(self.d, "t2")
        os.symlink(victim, t2 + ".error")
        self.assertIsNone(write_error(t2, "x"))
        self.assertEqual(os.path.getsize(victim), 0)


def seg(*allocated, segments=(0x1000,)):
    return [{"address": s, "total_size": 1 << 20, "blocks": [{"address": a, "size": 512, "state": "active_allocated"} for a in allocated if s <= a < s + (1 << 20)]} for s in segments]


class Split(unittest.TestCase):
    """Where among the records written while it was taken a snapshot lies."""

    def test_no_record_during_the_snapshot(self):
        self.assertEqual(split_point([], seg(0x1000)), 0)

    def test_an_alloc_the_snapshot_saw_and_one_it_did_not(self):
        w = [(ALLOC, 0x1000), (ALLOC, 0x1200)]
        self.assertEqual(split_point(w, seg(0x1000)), 1)
        self.assertEqual(split_point(w, seg(0x1000, 0x1200)), 2)
        self.assertEqual(split_point(w, seg()), 0)

    def test_a_free_and_an_alloc_again_at_the_same_address(self):
        w = [(FREE_REQUESTED, 0x1000), (ALLOC, 0x1000)]
        self.assertEqual(split_point(w, seg(0x1000)), 0)  # before both (or after both: the same)
        self.assertEqual(split_point(w, seg()), 1)

    def test_a_segment_made_during_the_snapshot(self):
        w = [(SEGMENT_ALLOC, 0x200000), (ALLOC, 0x200000)]
        self.assertEqual(split_point(w, seg(segments=(0x1000,))), 0)
        self.assertEqual(split_point(w, seg(segments=(0x1000, 0x200000))), 1)
        self.assertEqual(split_point(w, seg(0x200000, segments=(0x1000, 0x200000))), 2)

    def test_a_snapshot_no_split_explains_is_refused(self):
        # the second alloc seen without the first: the lock would never give that
        self.assertIsNone(split_point([(ALLOC, 0x1000), (ALLOC, 0x1200)], seg(0x1200)))


class Program:
    """attach_target.py, its output read line by line."""

    def __init__(self, *extra):
        self.tokens = tempfile.mkdtemp()
        self.agents = tempfile.mkdtemp()
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "agent"), GPUMEM_TUI_DIR=self.agents, GPUMEM_TUI_RING_CAPACITY="4096")
        env.pop("GPUMEM_TUI_STACKS", None)  # as shipped
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "attach_target.py"), "--tokens", self.tokens, *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.pid = int(self.line("pid ").split()[1])
        self.n = 0

    def line(self, prefix, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            out = self.p.stdout.readline()
            if not out:
                raise AssertionError("the program ended: %s" % self.p.stderr.read())
            if out.startswith(prefix):
                return out.strip()
        raise AssertionError("no line %r" % prefix)

    def attach(self, options=None):
        """Write a token as the monitor does; the program's bootstrap thread answers: the manifest
        where it attached, else the refusal in `<token>.error`."""
        self.n += 1
        # Written whole under another name, then renamed: the target's thread polls the folder (the
        # monitor instead hands the bootstrap a token's path once written), and must never read it half made.
        t = os.path.join(self.tokens, "attach-%d.json" % self.n)
        os.rename(token(self.tokens, ".writing-%d" % self.n, text=json.dumps(options or {}).encode()), t)
        manifest = self.line("attached").split()[1]
        if manifest != "None":
            with open(manifest) as f:
                m = json.load(f)
            return {"ok": True, "manifest": manifest, "socket": m["socket"], "hook_mode": m["hook_mode"]}
        with open(t + ".error") as f:
            return {"ok": False, "error": f.read()}

    def ask(self, sock, cmd):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(sock)
        s.sendall((json.dumps({"cmd": cmd}) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            buf += s.recv(65536)
        s.close()
        return json.loads(buf)

    def files(self):
        return sorted(os.listdir(self.agents))

    def close(self):
        self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.p.stderr.close()


class Attach(unittest.TestCase):
    def test_attach_seed_detach_and_attach_again(self):
        prog = Program()
        try:
            prog.line("step 3")
            r = prog.attach()
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["hook_mode"], "hook")
            with open(r["manifest"]) as f:
                m = json.load(f)
            self.assertEqual(m["attached"]["step"], 0)
            # the Python stacks on from the attach on, no variable set (the double's walker: this python's)
            self.assertEqual((m["stack_min_bytes"], m["stack_sample_bytes"], m["notes"].get("stacks")), (1 << 20, 512 << 10, None))
            self.assertEqual(m["seed"]["path"], os.path.join(prog.agents, "%d.seed.json" % prog.pid))
            with open(m["seed"]["path"]) as f:
                seed = json.load(f)
            self.assertEqual(stat.S_IMODE(os.stat(m["seed"]["path"]).st_mode), 0o600)
            blocks = {b["address"]: b["size"] for s in seed["devices"][0]["segments"] for b in s["blocks"]}
            # parameters (4 MiB + 1 MiB) and both AdamW states of each, from before the attach
            self.assertGreaterEqual(sorted(blocks.values(), reverse=True)[:6], [4 << 20] * 3 + [1 << 20] * 3)
            # a second attach while one runs: refused, in words, nothing started
            r2 = prog.attach()
            self.assertFalse(r2["ok"])
            self.assertIn("already attached", r2["error"])
            # steps run on under the agent; names come
            prog.line("step 8")
            names = prog.ask(r["socket"], "names")
            self.assertTrue(names["ok"])
            self.assertIn("wte.weight", [t["name"] for t in names["tensors"]])
            # detach: the reply, then every file goes
            self.assertEqual(prog.ask(r["socket"], "detach"), {"id": None, "ok": True, "detaching": True})
            end = time.time() + 5
            while prog.files() and time.time() < end:
                time.sleep(0.05)
            self.assertEqual(prog.files(), [])
            prog.line("step")
            # attach again in the same process: a new ring, a new seed
            r3 = prog.attach()
            self.assertTrue(r3["ok"], r3)
            self.assertEqual(sorted(prog.files()), sorted(["%d.json" % prog.pid, "%d.ring" % prog.pid, "%d.seed.json" % prog.pid, "%d.sock" % prog.pid]))
            with open(r3["manifest"]) as f:  # the second attach sets them afresh
                self.assertEqual(json.load(f)["stack_min_bytes"], 1 << 20)
            prog.line("step")
            self.assertTrue(prog.ask(r3["socket"], "info")["ok"])
        finally:
            prog.close()

    def test_the_monitor_that_attached_exits_and_the_agent_goes(self):
        prog = Program()
        monitor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            prog.line("step 2")
            r = prog.attach({"monitor_pid": monitor.pid, "monitor_start": attach._process_start(monitor.pid)})
            self.assertTrue(r["ok"], r)
            self.assertTrue(prog.files())
            monitor.kill()
            monitor.wait()
            end = time.time() + 10
            while prog.files() and time.time() < end:
                time.sleep(0.1)
            self.assertEqual(prog.files(), [])
            prog.line("step")  # the program runs on
        finally:
            monitor.kill()
            prog.close()

    def test_refusals_are_written_where_the_monitor_reads_them(self):
        for flag, words in (("--no-torch", "torch is not imported"), ("--no-cuda", "CUDA is not initialized")):
            prog = Program(flag)
            try:
                r = prog.attach()
                self.assertEqual(r["ok"], False)
                self.assertIn(words, r["error"])
                self.assertEqual(prog.files(), [])
            finally:
                prog.close()

    def test_a_token_the_monitor_gave_up_on_gets_nothing(self):
        d = tempfile.mkdtemp()
        t = token(d, age=300)
        self.assertIsNone(attach.attach_running(t))
        self.assertFalse(os.path.exists(t + ".error"))
        self.assertTrue(os.path.exists(t))

    def test_a_token_the_bootstrap_claimed_before_the_call(self):
        prog = Program()
        try:
            prog.line("step 1")
            r = prog.attach({"claimed": True})
            self.assertTrue(r["ok"], r)
            self.assertEqual(prog.files(), sorted("%d.%s" % (prog.pid, x) for x in ("json", "ring", "seed.json", "sock")))
        finally:
            prog.close()


class Totals(unittest.TestCase):
    def test_reserved_and_the_segment_counts_equal_torch_s_whichever_read_a_segment_follows(self):
        # attach_totals.py: a segment made right after the k-th read of the allocator's statistics
        # (1: after the copy before the hook counts; 2: between the settle's two reads; 0: none).
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "agent"))
        for k in range(5):
            out = subprocess.run([sys.executable, os.path.join(HERE, "attach_totals.py"), "--segment-after", str(k)],
                                 env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            r = json.loads(out.stdout)
            self.assertEqual(r["mode"], "hook", k)
            self.assertEqual(r["unsettled"], [], k)
            self.assertEqual(r["header"], r["torch"], "segment after read %d" % k)


if __name__ == "__main__":
    unittest.main()
