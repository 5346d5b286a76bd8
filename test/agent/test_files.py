"""The agent's files against a full filesystem and against other users (issue 24, items 2 and 3).

Standard library only, run by `bun test` (test/agent/files.test.ts). Other users are simulated with
a spare uid (setpriv, chown) and small filesystems with tmpfs mounts: both need root, and each such
test is skipped, saying why, where the tests do not run as root.
"""
import ctypes
import json
import os
import pickle
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent import build, paths, ring  # noqa: E402
from gpumem_agent.agent import Agent  # noqa: E402

OTHER = 4242  # a uid that is not ours: "another user"
MADE = []  # temporary directories, removed when the tests end


def mkdtemp():
    d = tempfile.mkdtemp(prefix="gpumem-files-")
    MADE.append(d)
    return d


def tearDownModule():
    for d in MADE:
        shutil.rmtree(d, ignore_errors=True)
ROOT = os.geteuid() == 0
needs_root = unittest.skipUnless(ROOT, "needs root (another uid, a tmpfs mount): run the tests as root")

# Writes one byte into every page of a file through a shared mapping, as the hook writes a ring.
WRITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size)
for off in range(0, size, mmap.PAGESIZE):
    m[off] = 1
print(size)
"""


def write_through(path):
    """Run a writer of every page of `path` in a child: its return code (-SIGBUS where a page
    could not be backed)."""
    return subprocess.run([sys.executable, "-c", WRITER, path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60).returncode


def as_other(*cmd):
    subprocess.run(["setpriv", "--reuid", str(OTHER), "--regid", str(OTHER), "--clear-groups", *cmd], check=True, timeout=30)


def shared_dir():
    """A directory anyone can create names in, as /dev/shm and /tmp are (1777)."""
    d = mkdtemp()
    os.chmod(d, 0o1777)
    return d


def victim():
    """A file of ours that a planted link points at: it must stay as it is."""
    fd, p = tempfile.mkstemp(dir=mkdtemp())
    os.write(fd, b"precious")
    os.close(fd)
    os.chmod(p, 0o644)
    return p


class Tmpfs:
    """A tmpfs of `size` mounted on a fresh directory (root only)."""

    def __init__(self, size):
        self.path = mkdtemp()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", self.path], check=True, timeout=30)

    def close(self):
        subprocess.run(["umount", "-l", self.path], timeout=30)
        os.rmdir(self.path)


# -- item 2: the ring never kills its writer ------------------------------------------------------


class RingFits(unittest.TestCase):
    def test_capacity_fits_half_the_free_space_shared_by_the_ranks(self):
        cap, lanes = ring.DEFAULT_CAPACITY, 2
        self.assertEqual(ring.fit_capacity(cap, lanes, None), cap)  # no stated limit
        self.assertEqual(ring.fit_capacity(cap, lanes, 1 << 40), cap)
        # Docker's 64 MB: two 16 MiB lanes and the header are over half of it; 8 MiB lanes are not.
        self.assertEqual(ring.fit_capacity(cap, lanes, 64 << 20), cap // 2)
        # Eight ranks starting together each take a sixteenth.
        got = ring.fit_capacity(cap, lanes, 64 << 20, ranks=8)
        self.assertLessEqual(8 * ring.ring_bytes(got, lanes), 32 << 20)
        self.assertGreater(8 * ring.ring_bytes(got * 2, lanes), 32 << 20)
        # Below twice the smallest ring: none.
        self.assertEqual(ring.fit_capacity(cap, lanes, 2 * ring.ring_bytes(ring.MIN_CAPACITY, lanes) - 1), 0)
        self.assertEqual(ring.fit_capacity(cap, lanes, 2 * ring.ring_bytes(ring.MIN_CAPACITY, lanes)), ring.MIN_CAPACITY)

    def test_every_page_is_backed_where_the_disk_allows(self):
        d = mkdtemp()
        r, note = ring.create_backed(os.path.join(d, "1.ring"), capacity=1024, n_devices=2)
        self.assertIsNone(note)
        st = os.stat(r.path)
        self.assertGreaterEqual(st.st_blocks * 512, st.st_size)  # not sparse
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(os.listdir(d), ["1.ring"])

    def test_a_link_planted_at_the_old_temporary_name_is_not_followed(self):
        d, v = shared_dir(), victim()
        path = os.path.join(d, "1.ring")
        os.symlink(v, "%s.%d.tmp" % (path, os.getpid()))
        ring.Ring(path, capacity=1024)
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        self.assertTrue(stat.S_ISREG(os.lstat(path).st_mode))


@needs_root
class RingOnSmallTmpfs(unittest.TestCase):
    def tearDown(self):
        self.fs.close()

    def test_todays_sparse_ring_kills_its_writer_a_backed_smaller_one_does_not(self):
        self.fs = Tmpfs("1m")
        # The hazard, as the ring was made before: a sparse file larger than the tmpfs.
        sparse = os.path.join(self.fs.path, "sparse.ring")
        fd = os.open(sparse, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, ring.ring_bytes(ring.DEFAULT_CAPACITY, 2))
        os.close(fd)
        self.assertEqual(write_through(sparse), -signal.SIGBUS)
        os.unlink(sparse)
        r, note = ring.create_backed(os.path.join(self.fs.path, "1.ring"), ring.DEFAULT_CAPACITY, n_devices=1)
        self.assertFalse(r.header_only)
        self.assertLess(r.capacity, ring.DEFAULT_CAPACITY)
        self.assertGreaterEqual(r.capacity, ring.MIN_CAPACITY)
        self.assertRegex(note, r"^ring made smaller: %d records a lane instead of %d \(%s has 1\.0 MiB free; rings take at most half of it\)$"
                         % (r.capacity, ring.DEFAULT_CAPACITY, self.fs.path))
        self.assertEqual(write_through(r.path), 0)
        self.assertLessEqual(os.stat(r.path).st_size, 512 << 10)

    def test_where_not_even_the_smallest_ring_fits_the_header_alone_and_polling(self):
        self.fs = Tmpfs("128k")
        r, note = ring.create_backed(os.path.join(self.fs.path, "1.ring"), ring.DEFAULT_CAPACITY, n_devices=8, ranks=8)
        self.assertTrue(r.header_only)
        self.assertRegex(note, r"^no event records, totals only \(polling\): %s has 0\.1 MiB free, and rings take at most half of it, "
                         r"shared by 8 ranks; the smallest ring is 0\.6 MiB$" % self.fs.path)
        back = ring.Ring(r.path, create=False)  # what the monitor opens: a valid ring of one slot
        self.assertEqual((back.capacity, back.n_lanes, back.lane_written(0)), (1, 1, 0))
        self.assertEqual(write_through(r.path), 0)

    def test_a_ring_that_cannot_be_backed_fails_at_creation_and_leaves_nothing(self):
        self.fs = Tmpfs("1m")
        with self.assertRaises(OSError) as e:
            ring.Ring(os.path.join(self.fs.path, "1.ring"), capacity=ring.DEFAULT_CAPACITY)
        self.assertEqual(e.exception.errno, 28)  # ENOSPC
        self.assertEqual(os.listdir(self.fs.path), [])

    def test_zeros_through_each_page_where_fallocate_is_missing(self):
        self.fs = Tmpfs("1m")
        fd = os.open(os.path.join(self.fs.path, "z"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            ring.back(fd, 256 << 10, fallocate=False)
            self.assertGreaterEqual(os.fstat(fd).st_blocks * 512, 256 << 10)
            with self.assertRaises(OSError) as e:
                ring.back(fd, 4 << 20, fallocate=False)
            self.assertEqual(e.exception.errno, 28)
        finally:
            os.close(fd)


# -- item 3: nothing another user can touch is trusted --------------------------------------------


class AgentDirectory(unittest.TestCase):
    def test_a_private_name_is_used_as_is(self):
        base = os.path.join(shared_dir(), "agents")
        self.assertEqual(paths.open_agent_dir(base), (base, None))
        self.assertEqual(stat.S_IMODE(os.lstat(base).st_mode), 0o700)

    def check_fallback(self, base, why):
        d, note = paths.open_agent_dir(base)
        self.assertNotEqual(d, base)
        self.assertTrue(os.path.basename(d).startswith(os.path.basename(base) + "."))
        st = os.lstat(d)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.getuid(), 0o700))
        self.assertEqual(note, "the agents' directory %s is %s; using %s instead (the monitor finds it too)" % (base, why, d))
        # The next agent takes the same fallback: one, not one a process.
        self.assertEqual(paths.open_agent_dir(base)[0], d)
        return d

    @needs_root
    def test_a_name_squatted_by_another_user(self):
        base = os.path.join(shared_dir(), "agents")
        as_other("mkdir", "-m", "0700", base)
        self.check_fallback(base, "owned by uid %d, not by us (%d)" % (OTHER, os.getuid()))

    @needs_root
    def test_a_name_squatted_open_to_all_by_another_user(self):
        base = os.path.join(shared_dir(), "agents")
        as_other("mkdir", "-m", "0777", base)
        self.check_fallback(base, "owned by uid %d, not by us (%d)" % (OTHER, os.getuid()))

    @needs_root
    def test_thousands_of_fallback_shaped_names_of_another_user_are_not_all_checked(self):
        # Another user squats the name and floods its parent: the agent looks at a bounded number
        # of them (strace counts its lstat calls) and makes a fallback of its own.
        parent = shared_dir()
        base = os.path.join(parent, "agents")
        as_other("/usr/bin/python3", "-c", "import os\nos.mkdir(%r, 0o777)\nfor i in range(5000): os.mkdir(%r + '.x%%05d' %% i, 0o700)" % (base, base))
        code = "import sys; sys.path.insert(0, %r); from gpumem_agent import paths; print(paths.open_agent_dir(%r)[0])" % (
            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent"), base)
        trace = os.path.join(mkdtemp(), "trace")
        p = subprocess.run(["strace", "-f", "-e", "trace=lstat,newfstatat,statx", "-o", trace, sys.executable, "-c", code],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        d = p.stdout.strip()
        st = os.lstat(d)
        self.assertEqual((os.path.dirname(d), st.st_uid, stat.S_IMODE(st.st_mode)), (parent, os.getuid(), 0o700))
        with open(trace) as f:
            looked = sum(1 for line in f if ".x0" in line)
        self.assertLessEqual(looked, paths.MAX_FALLBACK_CHECKS)

    def test_a_name_that_is_a_link(self):
        base = os.path.join(shared_dir(), "agents")
        target = mkdtemp()  # private and ours: a link to it is still not taken
        os.symlink(target, base)
        self.check_fallback(base, "a symbolic link")
        self.assertEqual(os.listdir(target), [])

    def test_a_name_open_to_everyone(self):
        base = os.path.join(shared_dir(), "agents")
        os.mkdir(base)
        os.chmod(base, 0o777)
        self.check_fallback(base, "open to other users (mode 777)")

    @needs_root
    def test_a_fallback_name_taken_by_another_user_is_not_reused(self):
        parent = shared_dir()
        base = os.path.join(parent, "agents")
        os.symlink("/", base)
        as_other("mkdir", "-m", "0700", base + ".aaaaaaaa")
        d = self.check_fallback(base, "a symbolic link")
        self.assertNotEqual(d, base + ".aaaaaaaa")

    def test_the_runtime_directory_is_preferred_where_it_is_private(self):
        uid = os.getuid()
        shm = "/dev/shm/gpumem-tui-%d" % uid if os.path.isdir("/dev/shm") else os.path.join(tempfile.gettempdir(), "gpumem-tui-%d" % uid)
        run = mkdtemp()
        self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": run}), os.path.join(run, "gpumem-tui"))
        self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": run, "GPUMEM_TUI_DIR": "/x"}), "/x")
        os.chmod(run, 0o755)
        self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": run}), shm)
        link = os.path.join(mkdtemp(), "run")
        os.chmod(run, 0o700)
        os.symlink(run, link)
        self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": link}), shm)
        self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": "relative"}), shm)
        if ROOT:
            os.chown(run, OTHER, OTHER)
            self.assertEqual(paths.agent_dir({"XDG_RUNTIME_DIR": run}), shm)


class PrivateFiles(unittest.TestCase):
    def test_a_link_planted_at_the_manifests_old_temporary_name_is_not_followed(self):
        d, v = shared_dir(), victim()
        path = os.path.join(d, "1.json")
        os.symlink(v, "%s.%d.tmp" % (path, os.getpid()))
        paths.write_private(path, b"{}")
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def test_a_failed_write_leaves_no_temporary_file(self):
        d = mkdtemp()

        def fail(f):
            f.write(b"half")
            raise RuntimeError("disk gone")

        with self.assertRaises(RuntimeError):
            paths.publish(os.path.join(d, "1.json"), fail)
        self.assertEqual(os.listdir(d), [])


def stand_in_torch(snapshot):
    """torch.cuda.memory as far as the agent's dump uses it (no torch on this machine; the GPU test
    runs the real one: test/agent/gpu_files.sh). _dump_snapshot is what torch's does."""

    def _dump_snapshot(filename="dump_snapshot.pickle"):
        with open(filename, "wb") as f:
            pickle.dump(snapshot(), f)

    memory = types.SimpleNamespace(_snapshot=snapshot, _dump_snapshot=_dump_snapshot)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(memory=memory))


class Dump(unittest.TestCase):
    def dump(self, path, snapshot=lambda: {"segments": [], "device_traces": []}):
        agent = types.SimpleNamespace(torch=stand_in_torch(snapshot), dir=os.path.dirname(path), pid=1)
        return Agent._dump(agent, "snapshot", path)

    def test_a_link_planted_at_the_dump_temporary_name_is_not_followed(self):
        d, v = shared_dir(), victim()
        path = os.path.join(d, "1-snapshot.pickle")
        os.symlink(v, path + ".tmp")
        self.assertEqual(self.dump(path), path)
        st = os.stat(v)
        with open(v, "rb") as f:
            self.assertEqual((f.read(), stat.S_IMODE(st.st_mode)), (b"precious", 0o644))
        with open(path, "rb") as f:
            self.assertEqual(pickle.load(f), {"segments": [], "device_traces": []})
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o600)

    def test_a_link_at_the_dump_name_itself_is_refused_not_followed(self):
        # The monitor names the dump (its working directory, --dump-dir): a link there is
        # refused as --output refuses one, and left as it was.
        d, v = shared_dir(), victim()
        path = os.path.join(d, "1-snapshot.pickle")
        os.symlink(v, path)
        with self.assertRaises(paths.UnsafeFile) as e:
            self.dump(path)
        self.assertEqual(str(e.exception), "not writing %s: it is a symbolic link (never followed)" % path)
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        self.assertEqual((os.readlink(path), os.listdir(d)), (v, ["1-snapshot.pickle"]))

    def test_a_failed_dump_leaves_nothing(self):
        d = mkdtemp()
        with self.assertRaises(Exception):
            self.dump(os.path.join(d, "1-snapshot.pickle"), snapshot=lambda: {"x": lambda: 0})  # not picklable
        self.assertEqual(os.listdir(d), [])


# -- issue 35, item 4: every file the agent writes, as --output is written --------------------------

# A program with the line profiler on (a real ring, a stand-in agent: no torch here), that profiles
# one call, prints, and exits with status 3: what it prints and its status must not change whatever
# is planted at GPUMEM_PROFILE_JSON.
PROFILED_PROGRAM = """
import os, sys, tempfile, types
sys.path.insert(0, %r)
from gpumem_agent import ring
from gpumem_agent.lines import Profiler
cuda = types.SimpleNamespace(current_device=lambda: 0, init=lambda: None,
                             memory_stats=lambda d: {"active_bytes.all.current": 0, "reserved_bytes.all.current": 0})
r = ring.Ring(os.path.join(tempfile.mkdtemp(), "t.ring"), capacity=1024)
agent = types.SimpleNamespace(ring=r, mode="hook", started=True, active=True, hook_error=None, torch=types.SimpleNamespace(cuda=cuda))
os.environ["GPUMEM_PROFILE_QUIET"] = "1"
profiler = Profiler(lambda: agent)
secret_api_key = "sk-123"
print(profiler.wrap(lambda: secret_api_key + "!")())
sys.exit(3)
""" % os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent")


def profiled_program(lines_json):
    """Runs PROFILED_PROGRAM with GPUMEM_PROFILE_JSON=`lines_json` (bounded: a hang is a failure)."""
    env = dict(os.environ, GPUMEM_PROFILE_JSON=lines_json)
    return subprocess.run([sys.executable, "-c", PROFILED_PROGRAM], env=env, capture_output=True, text=True, timeout=5)


def fifo_at(path):
    os.mkfifo(path, 0o666)
    return path


def planted_by_other(path, what):
    """Another user plants `what` ("link:TARGET", "fifo", "file") at `path` in a shared directory."""
    if what.startswith("link:"):
        as_other("ln", "-s", what[5:], path)
    elif what == "fifo":
        as_other("mkfifo", "-m", "0666", path)
    else:
        as_other("sh", "-c", "echo theirs > %s; chmod 666 %s" % (path, path))


class LinesJson(unittest.TestCase):
    def assert_unchanged_program(self, p):
        self.assertEqual((p.returncode, p.stdout), (3, "sk-123!\n"))

    def refused(self, path, why):
        p = profiled_program(path)
        self.assert_unchanged_program(p)
        self.assertEqual(p.stderr, "gpumem_agent.profile: not writing GPUMEM_PROFILE_JSON=%s: %s\n" % (path, why))
        self.assertEqual([n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")], [])  # no temporary left
        return p

    def test_written_0600_where_nothing_is_there_and_over_a_file_of_ours(self):
        d = mkdtemp()
        path = os.path.join(d, "run.lines.json")
        for _ in range(2):  # the second run replaces the first's file
            p = profiled_program(path)
            self.assert_unchanged_program(p)
            self.assertEqual(p.stderr, "")
            with open(path) as f:
                self.assertEqual(json.load(f)[0]["profiled_calls"], 1)
            self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o600)
        self.assertEqual(os.listdir(d), ["run.lines.json"])

    def test_a_link_planted_at_the_path_is_not_followed(self):
        d, v = shared_dir(), victim()
        path = os.path.join(d, "run.lines.json")
        os.symlink(v, path)
        self.refused(path, "it is a symbolic link (never followed)")
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        self.assertEqual(os.readlink(path), v)

    @needs_root
    def test_a_link_another_user_planted_is_not_followed(self):
        d, v = shared_dir(), victim()
        path = os.path.join(d, "run.lines.json")
        planted_by_other(path, "link:" + v)
        self.refused(path, "it is a symbolic link (never followed)")
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")

    def test_a_fifo_at_the_path_does_not_hang_the_exit(self):
        d = shared_dir()
        path = fifo_at(os.path.join(d, "run.lines.json"))
        self.refused(path, "not a regular file (a FIFO)")
        self.assertTrue(stat.S_ISFIFO(os.lstat(path).st_mode))

    @needs_root
    def test_another_users_file_at_the_path_is_left_alone(self):
        d = shared_dir()
        path = os.path.join(d, "run.lines.json")
        planted_by_other(path, "file")
        self.refused(path, "it belongs to another user (uid %d)" % OTHER)
        with open(path) as f:
            self.assertEqual(f.read(), "theirs\n")


class SavedRing(unittest.TestCase):
    """gpumem_agent.save_ring(path): the ring's copy and its manifest path.json."""

    def save(self, path):
        import gpumem_agent

        src = ring.Ring(os.path.join(mkdtemp(), "src.ring"), capacity=1024)
        old = gpumem_agent._agent
        gpumem_agent._agent = types.SimpleNamespace(ring=src, ring_path=src.path, sync=lambda: None, manifest=lambda: {"pid": 1})
        try:
            return gpumem_agent.save_ring(path)
        finally:
            gpumem_agent._agent = old
            src.close()

    def test_both_files_0600(self):
        d = mkdtemp()
        self.assertEqual(self.save(os.path.join(d, "x.ring")), 0)
        with open(os.path.join(d, "x.json")) as f:
            self.assertEqual(json.load(f), {"pid": 1, "ring": "x.ring"})
        for name in ("x.ring", "x.json"):
            self.assertEqual(stat.S_IMODE(os.lstat(os.path.join(d, name)).st_mode), 0o600)
        self.assertEqual(sorted(os.listdir(d)), ["x.json", "x.ring"])

    def check_refused(self, plant, why):
        for target in ("x.ring", "x.json"):
            d = shared_dir()
            planted = os.path.join(d, target)
            plant(planted)
            with self.assertRaises(OSError) as e:
                self.save(os.path.join(d, "x.ring"))
            self.assertEqual(str(e.exception), "not writing %s: %s" % (planted, why))
            self.assertEqual(os.listdir(d), [target])  # neither file written, no temporary left

    def test_a_link_at_either_name_is_refused_not_followed(self):
        v = victim()
        self.check_refused(lambda p: os.symlink(v, p), "it is a symbolic link (never followed)")
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")

    def test_a_fifo_at_either_name_is_refused_at_once(self):
        # In a child with a bound: the copy opened a FIFO for writing and waited for a reader.
        code = "import sys; sys.argv = ['x']; import unittest; sys.path.insert(0, %r); import test_files as t; " \
               "t.SavedRing('test_both_files_0600').check_refused(t.fifo_at, 'not a regular file (a FIFO)')" % os.path.dirname(os.path.abspath(__file__))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=5)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    @needs_root
    def test_another_users_file_at_either_name_is_refused(self):
        self.check_refused(lambda p: planted_by_other(p, "file"), "it belongs to another user (uid %d)" % OTHER)

    def test_the_compact_tool_says_why_in_one_line(self):
        d, v = shared_dir(), victim()
        src = ring.Ring(os.path.join(mkdtemp(), "src.ring"), capacity=1024)
        src.close()
        os.symlink(v, os.path.join(d, "c.ring"))
        err = subprocess.run([sys.executable, "-m", "gpumem_agent.ring", "compact", src.path, os.path.join(d, "c.ring")], capture_output=True, text=True,
                             timeout=5, cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent"))
        self.assertEqual((err.returncode, err.stderr), (2, "gpumem_agent.ring: not writing %s: it is a symbolic link (never followed)\n" % os.path.join(d, "c.ring")))
        with open(v, "rb") as f:
            self.assertEqual(f.read(), b"precious")


HOOK_C = r"""
#include <stdio.h>
#include <stdlib.h>
/* Says that it ran: a library that must not be loaded leaves no marker. */
__attribute__((constructor)) static void ran(void) {
  const char *p = getenv("GPUMEM_TEST_MARKER");
  FILE *f = p ? fopen(p, "a") : NULL;
  if (f) { fputs("ran\n", f); fclose(f); }
}
int gpumem_test_answer(void) { return 42; }
"""


class HookCache(unittest.TestCase):
    def setUp(self):
        self.umask = os.umask(0o002)  # a shared group's umask: what made the cache 0775 before
        self.home = mkdtemp()
        self.marker = os.path.join(self.home, "marker")
        os.environ["GPUMEM_TEST_MARKER"] = self.marker
        self.src = os.path.join(self.home, "lib.c")
        with open(self.src, "w") as f:
            f.write(HOOK_C)

    def tearDown(self):
        os.umask(self.umask)

    def compile(self, d, name):
        out = os.path.join(d, name)
        tmp = out + ".tmp"
        cc = shutil.which("cc") or shutil.which("gcc")
        return build.compile_to([cc, "-shared", "-fPIC", self.src, "-o", tmp], tmp, out, os.path.join(d, name + ".log"))

    def ran(self):
        return os.path.exists(self.marker)

    def test_the_cache_is_made_private_whatever_the_umask(self):
        d = build.ensure_cache_dir(build.cache_dir({"XDG_CACHE_HOME": self.home}))
        self.assertEqual(stat.S_IMODE(os.lstat(d).st_mode), 0o700)

    def test_a_cache_others_can_write_is_refused_with_what_to_fix(self):
        d = os.path.join(self.home, "gpumem-tui")
        os.mkdir(d, 0o775)
        os.chmod(d, 0o775)
        with self.assertRaises(build.BuildError) as e:
            build.ensure_cache_dir(d)
        self.assertEqual(str(e.exception), "the hook cache %s is writable by other users (mode 775): not loading a hook from it; "
                         "remove it (rm -r %s) and the agent makes a private one" % (d, d))

    def test_a_cache_that_is_a_link_is_refused(self):
        d = os.path.join(self.home, "gpumem-tui")
        os.symlink(mkdtemp(), d)
        with self.assertRaisesRegex(build.BuildError, "is not a directory"):
            build.ensure_cache_dir(d)

    @needs_root
    def test_a_cache_of_another_user_is_refused(self):
        d = os.path.join(self.home, "gpumem-tui")
        os.mkdir(d, 0o700)
        os.chown(d, OTHER, OTHER)
        with self.assertRaisesRegex(build.BuildError, "belongs to uid %d, not to us" % OTHER):
            build.ensure_cache_dir(d)

    def test_the_build_and_its_log_are_ours_alone(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        lib = self.compile(d, "hook-a.so")
        self.assertEqual(stat.S_IMODE(os.stat(lib).st_mode) & 0o077, 0)
        with self.assertRaises(build.BuildError):
            build.compile_to(["/bin/sh", "-c", "echo no; exit 1"], lib + ".x", lib + ".y", os.path.join(d, "hook-b.log"))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "hook-b.log")).st_mode), 0o600)

    def test_our_own_library_is_loaded(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        lib = build.load_checked(self.compile(d, "hook-ok.so"))
        self.assertEqual(lib.gpumem_test_answer(), 42)
        self.assertTrue(self.ran())

    def refused(self, lib, pattern):
        with self.assertRaisesRegex(build.BuildError, pattern):
            build.load_checked(lib)
        self.assertFalse(self.ran(), "the refused library's code ran")

    def test_a_library_others_can_write_is_not_loaded(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        lib = self.compile(d, "hook-g.so")
        os.chmod(lib, 0o775)
        self.refused(lib, r"hook-g\.so is writable by other users \(mode 775\): not loaded; remove it")

    @needs_root
    def test_a_library_of_another_user_is_not_loaded(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        lib = self.compile(d, "hook-o.so")
        os.chown(lib, OTHER, OTHER)
        self.refused(lib, "belongs to uid %d, not to us" % OTHER)

    def test_a_library_behind_a_link_is_not_loaded(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        real = self.compile(d, "hook-r.so")
        os.symlink(real, os.path.join(d, "hook-l.so"))
        self.refused(os.path.join(d, "hook-l.so"), "cannot be opened")

    def test_a_library_in_a_directory_others_can_write_is_not_loaded(self):
        d = build.ensure_cache_dir(os.path.join(self.home, "cache"))
        lib = self.compile(d, "hook-d.so")
        os.chmod(d, 0o775)
        self.refused(lib, r"the hook's directory .* is writable by other users \(mode 775\): not loaded")


if __name__ == "__main__":
    unittest.main()
