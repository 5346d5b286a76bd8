"""The agent's parts that need no torch: control protocol, security checks, files. Standard
library only, run by `bun test` (test/agent/python.test.ts) on any machine."""
import json
import os
import socket
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

import subprocess  # noqa: E402

from gpumem_agent import build, identity, paths, ring, wire  # noqa: E402
from gpumem_agent.agent import _env_int, job_id, ring_capacity  # noqa: E402
from gpumem_agent.stats import totals_from_stats  # noqa: E402
from gpumem_agent.control import MAX_LINE, ControlServer, handle_line, parse_request  # noqa: E402


def client(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def ask(s, line):
    if line:
        s.sendall(line if isinstance(line, bytes) else line.encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf) if buf else None


class Protocol(unittest.TestCase):
    handlers = {"echo": lambda **kw: {"args": kw}, "boom": lambda: 1 / 0}

    def test_requests(self):
        self.assertEqual(parse_request(b'{"id": 3, "cmd": "info"}'), (3, "info", {}))
        for bad, why in [(b"{", "not JSON"), (b"[1]", "JSON object"), (b'{"id": 1}', '"cmd"'), (b'{"cmd": "x", "id": [1]}', '"id"')]:
            with self.assertRaises(ValueError) as e:
                parse_request(bad)
            self.assertIn(why, str(e.exception))

    def test_replies(self):
        self.assertEqual(handle_line(b'{"id": 1, "cmd": "echo", "a": 2}', self.handlers), {"id": 1, "ok": True, "args": {"a": 2}})
        r = handle_line(b'{"id": 2, "cmd": "nope"}', self.handlers)
        self.assertEqual((r["ok"], r["id"]), (False, 2))
        self.assertIn("unknown command 'nope'; known: boom, echo", r["error"])
        self.assertIn("ZeroDivisionError", handle_line(b'{"cmd": "boom"}', self.handlers)["error"])
        self.assertIn("bad arguments", handle_line(b'{"cmd": "boom", "x": 1}', self.handlers)["error"])
        self.assertIn("longer than", handle_line(b"x" * (MAX_LINE + 1), self.handlers)["error"])


class Server(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "1.sock")

    def test_socket_is_private_and_answers(self):
        srv = ControlServer(self.path, {"echo": lambda **kw: kw}).start()
        try:
            self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
            s = client(self.path)
            self.assertEqual(ask(s, '{"id": 9, "cmd": "echo", "x": 1}\n'), {"id": 9, "ok": True, "x": 1})
            s.close()
        finally:
            srv.stop()
        self.assertFalse(os.path.exists(self.path))

    def test_peer_of_another_uid_is_refused(self):
        srv = ControlServer(self.path, {"echo": lambda **kw: kw}, uid=os.getuid() + 4242).start()
        try:
            # The refusal comes at once, before the client says anything (and nothing it sends is read).
            reply = ask(client(self.path), b"")
            self.assertFalse(reply["ok"])
            self.assertIn("refused: peer uid %d is not this process's" % os.getuid(), reply["error"])
        finally:
            srv.stop()

    def test_flood_of_bad_lines_then_a_good_one(self):
        calls = []
        srv = ControlServer(self.path, {"echo": lambda **kw: calls.append(kw) or {}}).start()
        try:
            s = client(self.path)
            for bad in [b"garbage\n", b"{\n", b'{"cmd": 5}\n', b"\xff\xfe\n", b'{"cmd":"nope"}\n'] * 40:
                self.assertFalse(ask(s, bad)["ok"])
            self.assertTrue(ask(s, '{"cmd": "echo", "n": 1}\n')["ok"])
            self.assertEqual(calls, [{"n": 1}])
            # A line past the bound: answered with an error and the connection closed, others fine.
            s2 = client(self.path)
            reply = ask(s2, b"x" * (MAX_LINE + 10))
            self.assertIn("connection closed", reply["error"])
            self.assertTrue(ask(client(self.path), '{"cmd": "echo"}\n')["ok"])
        finally:
            srv.stop()

    def test_a_second_of_fuzzed_lines(self):
        # Mutations of real requests, random bytes and hostile JSON, for one second: every line
        # gets one JSON reply with ok true or false, handlers see only keyword arguments, and the
        # server still answers a good request after.
        import random

        rng = random.Random(1234)
        seen = []

        def echo(**kw):
            seen.append(kw)
            return {"n": len(kw)}

        srv = ControlServer(self.path, {"echo": echo, "names": lambda scan=False: {"scan": scan}}).start()
        good = [b'{"cmd": "echo", "a": 1}', b'{"cmd": "names", "scan": true}', b'{"cmd": "echo"}']
        hostile = [b"[" * 5000, b'{"cmd": "echo", "a": ' + b"[" * 3000 + b"]" * 3000 + b"}", b'{"cmd": "__class__"}',
                   b'{"cmd": "echo", "__proto__": {}}', b'{"cmd": "names", "scan": "yes", "x": 1}', b"1e999", b'"\ud800"', b"null"]
        try:
            s = client(self.path)
            t0 = time.time()
            n = 0
            while time.time() - t0 < 1.0:
                k = rng.random()
                if k < 0.4:
                    line = bytearray(rng.choice(good))
                    for _ in range(rng.randint(1, 4)):
                        i = rng.randrange(len(line))
                        line[i] = rng.randrange(256) if rng.random() < 0.5 else rng.choice(b'{}[]":,\\ 0')
                    line = bytes(line).replace(b"\n", b" ")
                elif k < 0.7:
                    line = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))).replace(b"\n", b" ")
                else:
                    line = rng.choice(hostile)
                if not line.strip():
                    continue  # blank lines are skipped without a reply (docs/protocol.md)
                reply = ask(s, line + b"\n")
                self.assertIsInstance(reply, dict)
                self.assertIn(reply["ok"], (True, False))
                if not reply["ok"]:
                    self.assertIsInstance(reply["error"], str)
                n += 1
            self.assertGreater(n, 100)
            self.assertTrue(all(isinstance(kw, dict) for kw in seen))
            self.assertTrue(ask(client(self.path), b'{"cmd": "echo", "last": 1}\n')["ok"])
        finally:
            srv.stop()

    def test_a_slow_client_does_not_stall_the_others(self):
        srv = ControlServer(self.path, {"echo": lambda **kw: kw}).start()
        try:
            idle = client(self.path)
            idle.sendall(b'{"cmd": "ec')  # half a line, never finished
            t = time.time()
            self.assertTrue(ask(client(self.path), '{"cmd": "echo"}\n')["ok"])
            self.assertLess(time.time() - t, 2)
        finally:
            srv.stop()


class Launchers(unittest.TestCase):
    def test_job_id_from_what_the_launcher_sets(self):
        self.assertEqual(job_id({"TORCHELASTIC_RUN_ID": "c1f0", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"}), "torchelastic:c1f0")
        # torchrun's default run id is "none" for every job: the rendezvous address tells them apart.
        self.assertEqual(job_id({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"}), "n1:29500")
        self.assertEqual(job_id({"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}), "slurm:77.0")
        self.assertIsNone(job_id({}))

    def test_ranks_from_torchrun_then_open_mpi_then_slurm(self):
        env = {"OMPI_COMM_WORLD_RANK": "3", "SLURM_PROCID": "9"}
        old = dict(os.environ)
        try:
            os.environ.pop("RANK", None)
            os.environ.update(env)
            self.assertEqual(_env_int("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"), 3)
            os.environ["RANK"] = "5"
            self.assertEqual(_env_int("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"), 5)
            os.environ["RANK"] = "not-a-number"
            self.assertEqual(_env_int("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"), 3)
        finally:
            os.environ.clear()
            os.environ.update(old)


class RingCapacity(unittest.TestCase):
    def test_a_bad_capacity_is_said_and_the_default_used(self):
        import contextlib
        import io
        self.assertEqual(ring_capacity({}), ring.DEFAULT_CAPACITY)
        self.assertEqual(ring_capacity({"GPUMEM_TUI_RING_CAPACITY": "1024"}), 1024)
        for bad in ["abc", "1000", "0", "-4", str(1 << 40)]:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(ring_capacity({"GPUMEM_TUI_RING_CAPACITY": bad}), ring.DEFAULT_CAPACITY)
            self.assertIn("GPUMEM_TUI_RING_CAPACITY=%s is not a power of two from 1024 to 67108864 records; using 262144" % bad, err.getvalue())


class Files(unittest.TestCase):
    def test_private_dir(self):
        d = os.path.join(tempfile.mkdtemp(), "agents")
        paths.ensure_private_dir(d)
        self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700)
        os.chmod(d, 0o777)
        with self.assertRaises(paths.UnsafeDirectory) as e:
            paths.ensure_private_dir(d)
        self.assertIn("open to other users (mode 777)", str(e.exception))

    def test_manifest_written_whole_and_private(self):
        d = tempfile.mkdtemp()
        p = os.path.join(d, "1.json")
        paths.write_private(p, b'{"a": 1}')
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o600)
        self.assertEqual(os.listdir(d), ["1.json"])

    def test_ring_round_trip_and_compact_copy(self):
        d = tempfile.mkdtemp()
        r = ring.Ring(os.path.join(d, "a.ring"), capacity=8, n_devices=2)
        self.assertEqual(stat.S_IMODE(os.stat(r.path).st_mode), 0o600)
        r.set_totals(1, allocated=512, reserved=2 << 20)
        self.assertEqual((r.totals(1)["allocated"], r.totals(1)["reserved"]), (512, 2 << 20))
        # Ten records written the way the hook does (seq = index + 1) into 8 slots: 2 lapped.
        for i in range(10):
            ring.RECORD.pack_into(r.map, ring.HEADER_SIZE + (i % 8) * ring.RECORD_SIZE, i + 1, i, 0x1000 + i, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        r.set("<Q", "write_index", 10)
        self.assertEqual([x[2] for x in r.records()], [0x1000 + i for i in range(2, 10)])
        n = ring.save_compact(r.path, os.path.join(d, "b.ring"))
        c = ring.Ring(os.path.join(d, "b.ring"), create=False)
        self.assertEqual((n, c.capacity, c.get("<Q", "write_index")), (8, 8, 8))
        self.assertEqual([x[0] for x in c.records()], list(range(1, 9)))
        self.assertEqual(c.totals(1)["reserved"], 2 << 20)


# The shape of torch.cuda.memory_stats() (the keys the agent reads, with made-up figures).
STATS = {
    "allocated_bytes.all.current": 5120, "allocated_bytes.all.peak": 9216,
    "active_bytes.all.current": 6144, "active_bytes.all.peak": 9728,
    "reserved_bytes.all.current": 2 << 20, "reserved_bytes.all.peak": 4 << 20,
    "requested_bytes.all.current": 5000, "num_alloc_retries": 1, "num_ooms": 2,
    "allocation.all.allocated": 30, "allocation.all.freed": 20,
    "segment.all.allocated": 3, "segment.all.freed": 1,
}


class Totals(unittest.TestCase):
    def setUp(self):
        self.r = ring.Ring(os.path.join(tempfile.mkdtemp(), "t.ring"), capacity=8)

    def test_polling_copies_every_figure(self):
        self.r.set_totals(0, **totals_from_stats(STATS, "polling"))
        t = self.r.totals(0)
        self.assertEqual(
            [t[k] for k in ("allocated", "reserved", "active", "peak_allocated", "peak_reserved", "peak_active", "requested", "n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom", "n_retries")],
            [5120, 2 << 20, 6144, 9216, 4 << 20, 9728, 5000, 30, 20, 3, 1, 2, 1],
        )

    def test_with_the_hook_only_block_size_figures_are_copied(self):
        # What the hook counted from events stays; allocated/active (block sizes) are corrected.
        self.r.set_totals(0, allocated=4999, reserved=6 << 20, peak_reserved=6 << 20, requested=4999, n_alloc=31, n_oom=0)
        self.r.set_totals(0, **totals_from_stats(STATS, "hook"))
        t = self.r.totals(0)
        self.assertEqual((t["allocated"], t["active"], t["peak_allocated"], t["n_retries"]), (5120, 6144, 9216, 1))
        self.assertEqual((t["reserved"], t["peak_reserved"], t["requested"], t["n_alloc"], t["n_oom"]), (6 << 20, 6 << 20, 4999, 31, 0))

    def test_the_nested_statistics_give_the_same_figures(self):
        # torch._C._cuda_memoryStats: the dict memory_stats() flattens ("a.b.c" is a["b"]["c"]).
        nested = {}
        for key, value in STATS.items():
            *path, last = key.split(".")
            d = nested
            for part in path:
                d = d.setdefault(part, {})
            d[last] = value
        nested["allocated_bytes"]["small_pool"] = {"current": 1, "peak": 1}  # pools beside "all"
        for mode in ("polling", "hook"):
            self.assertEqual(totals_from_stats(nested, mode), totals_from_stats(STATS, mode))

    def test_an_allocator_without_figures_reads_as_zero(self):
        self.r.set_totals(0, **totals_from_stats({}, "polling"))
        self.assertEqual(set(self.r.totals(0).values()), {0})


class RingFiles(unittest.TestCase):
    def run_tool(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "agent"))
        return subprocess.run([sys.executable, "-m", "gpumem_agent.ring", *args], env=env, capture_output=True, text=True)

    def test_files_that_are_not_rings_are_refused_in_words(self):
        d = tempfile.mkdtemp()
        cases = {
            "short": (b"x" * 100, "shorter than its header"),
            "magic": (b"\0" * (ring.HEADER_SIZE + 64), "not a gpumem ring (magic 0x0)"),
        }
        good = ring.Ring(os.path.join(d, "good.ring"), capacity=8)
        good.set("<I", "abi_version", 99)
        good.map.flush()
        for name, (data, why) in cases.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        for name, why in [("short", "shorter than its header"), ("magic", "not a gpumem ring (magic 0x0)"), ("good.ring", "a ring of ABI 99; this agent reads ABI 1")]:
            with self.assertRaises(ValueError) as e:
                ring.Ring(os.path.join(d, name), create=False)
            self.assertIn(why, str(e.exception))
            p = self.run_tool("compact", os.path.join(d, name), os.path.join(d, "out.ring"))
            self.assertEqual(p.returncode, 2)
            self.assertIn(why, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "out.ring")))

    def test_compact_tool(self):
        d = tempfile.mkdtemp()
        r = ring.Ring(os.path.join(d, "a.ring"), capacity=16)
        for i in range(5):
            ring.RECORD.pack_into(r.map, ring.HEADER_SIZE + i * ring.RECORD_SIZE, i + 1, i, 0x1000 + i, 512, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        r.set("<Q", "write_index", 5)
        p = self.run_tool("compact", r.path, os.path.join(d, "b.ring"))
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "5 records -> %s" % os.path.join(d, "b.ring")))
        c = ring.Ring(os.path.join(d, "b.ring"), create=False)
        self.assertEqual((c.capacity, [x[2] for x in c.records()]), (8, [0x1000 + i for i in range(5)]))
        self.assertEqual(os.path.getsize(c.path), ring.HEADER_SIZE + 8 * ring.RECORD_SIZE)


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


class RecordedRings(unittest.TestCase):
    """The rings the agent recorded on an H100 (test/fixtures): the events alone add up to what
    torch itself reported at the end of each run, so no event was lost or counted twice."""

    def check(self, name):
        r = ring.Ring(os.path.join(FIXTURES, name + ".ring"), create=False)
        with open(os.path.join(FIXTURES, name + ".facts.json")) as f:
            facts = json.load(f)
        with open(os.path.join(FIXTURES, name + ".json")) as f:
            manifest = json.load(f)
        recs = r.records()
        self.assertEqual([x[0] for x in recs], list(range(1, len(recs) + 1)))
        self.assertEqual(len(recs), facts["records"])
        by = {a: [x for x in recs if x[8] == n] for a, n in wire.ACTION.items()}
        total = lambda a: sum(x[3] for x in by[a])  # noqa: E731
        self.assertEqual(total("alloc") - total("free_requested"), facts["requested_bytes"])
        self.assertEqual(total("segment_alloc") - total("segment_free"), facts["memory_reserved"])
        self.assertEqual((len(by["alloc"]), len(by["free_requested"])), (facts["allocation_count"], facts["free_count"]))
        t = r.totals(0)
        self.assertEqual((t["allocated"], t["reserved"], t["requested"]), (facts["memory_allocated"], facts["memory_reserved"], facts["requested_bytes"]))
        self.assertEqual([x[6] for x in by["step"]], list(range(1, facts["steps"] + 1)))
        self.assertEqual(manifest["hook_mode"], "hook")
        # Every range a record names is in the manifest; enters and exits pair up.
        used = {x[7] for x in recs if x[7]}
        self.assertTrue(used <= {int(k) for k in manifest["ranges"]}, used)
        self.assertEqual(len(by["range_enter"]), len(by["range_exit"]))
        return by, facts

    def test_normal_runs(self):
        for name in ("normal", "normal-history", "no-zero-grad", "kept-loss-graph"):
            with self.subTest(name):
                by, facts = self.check(name)
                self.assertEqual(len(by["oom"]), 0)

    def test_oom(self):
        by, facts = self.check("oom")
        self.assertEqual(facts["num_ooms"], 1)
        [oom] = by["oom"]
        self.assertEqual(oom[3], 1 << 44)  # the request: 16 TiB
        self.assertGreater(oom[5], 0)  # free bytes on the device at that moment
        self.assertLess(oom[5], 100 << 30)


class Build(unittest.TestCase):
    """The compile step of the hook's build, with stand-in commands (the real one needs torch)."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.tmp, self.out, self.log = (os.path.join(self.d, n) for n in ("hook.so.1.tmp", "hook.so", "hook.log"))

    def test_a_failed_build_says_the_command_the_error_and_where_the_log_is(self):
        cmd = ["/bin/sh", "-c", "echo 'hook.cpp:7: error: no member named attachAllocatorTraceTracker'; exit 1"]
        with self.assertRaises(build.BuildError) as e:
            build.compile_to(cmd, self.tmp, self.out, self.log)
        msg = str(e.exception)
        self.assertTrue(msg.startswith("building the hook failed (/bin/sh -c 'echo "), msg)
        self.assertIn("full log: %s" % self.log, msg)
        self.assertTrue(msg.endswith("error: no member named attachAllocatorTraceTracker"), msg)
        with open(self.log) as f:
            log = f.read()
        self.assertTrue(log.startswith("$ /bin/sh -c "))
        self.assertIn("exit status 1\nhook.cpp:7: error", log)
        self.assertFalse(os.path.exists(self.out))

    def test_a_compiler_that_cannot_start(self):
        with self.assertRaises(build.BuildError) as e:
            build.compile_to(["/nonexistent/g++", "hook.cpp"], self.tmp, self.out, self.log)
        self.assertIn("No such file or directory", str(e.exception))

    def test_a_build_is_published_whole(self):
        self.assertEqual(build.compile_to(["/bin/sh", "-c", "printf ELF > %s" % self.tmp], self.tmp, self.out, self.log), self.out)
        self.assertEqual(sorted(os.listdir(self.d)), ["hook.so"])
        with self.assertRaises(build.BuildError) as e:  # exit 0 but no library: still a failure
            build.compile_to(["/bin/true"], self.tmp, self.out + "2", self.log)
        self.assertIn("the compiler succeeded but wrote no", str(e.exception))


class Identity(unittest.TestCase):
    """What the manifest says for the monitor to join on: device UUIDs in NVML's spelling, the
    pid namespace."""

    class CUuuid:  # torch 2.x: str() is the bare UUID, .bytes its 16 bytes
        def __init__(self, text):
            self.text = text
            self.bytes = list(bytes.fromhex(text.replace("-", "")))

        def __str__(self):
            return self.text

    class Props:
        def __init__(self, uuid):
            if uuid is not None:
                self.uuid = uuid

    def test_uuid_spelled_as_nvml_does(self):
        bare = "6f1d3a2e-8c4b-4f6e-9a1b-2c3d4e5f6a7b"
        self.assertEqual(identity.device_uuid(self.Props(self.CUuuid(bare))), "GPU-" + bare)
        self.assertEqual(identity.device_uuid(self.Props(self.CUuuid(bare.upper()))), "GPU-" + bare)
        self.assertEqual(identity.device_uuid(self.Props("GPU-" + bare)), "GPU-" + bare)
        self.assertEqual(identity.device_uuid(self.Props(None)), None)  # an older torch: no attribute

        class OnlyBytes:  # a str() that is not a UUID: the bytes say it
            bytes = list(bytes.fromhex(bare.replace("-", "")))

        self.assertEqual(identity.device_uuid(self.Props(OnlyBytes())), "GPU-" + bare)

    def test_uuids_per_device_none_where_unreadable(self):
        class Cuda:
            @staticmethod
            def get_device_properties(i):
                if i == 1:
                    raise RuntimeError("no device 1")
                return Identity.Props(Identity.CUuuid("00000000-0000-0000-0000-00000000000%d" % i))

        class Torch:
            cuda = Cuda

        self.assertEqual(identity.device_uuids(Torch, [0, 1, 2]), ["GPU-00000000-0000-0000-0000-000000000000", None, "GPU-00000000-0000-0000-0000-000000000002"])

    def test_pid_namespace(self):
        link = os.readlink("/proc/self/ns/pid")
        self.assertEqual(identity.pid_namespace(), int(link[len("pid:["):-1]))
        self.assertIsNone(identity.pid_namespace("/nonexistent/ns/pid"))


if __name__ == "__main__":
    unittest.main()
