"""The Python stacks the hook captures (cuda/pystack.c, built into the hook double here): the
calling thread's frames read without the GIL, interned, as text; and the agent's threshold
(stacks.py). Standard library only, on this machine's CPython; run by test/agent/stacks.test.ts
with GPUMEM_TEST_HOOK_DOUBLE set."""
import ctypes
import io
import os
import sys
import threading
import unittest
from contextlib import redirect_stderr

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))
from gpumem_agent import stacks  # noqa: E402

LIB = os.environ["GPUMEM_TEST_HOOK_DOUBLE"]
released = ctypes.CDLL(LIB)  # the GIL released around the call, as PyTorch's ops do
held = ctypes.PyDLL(LIB)  # the GIL held
for lib in (released, held):
    lib.gpumem_pystack_capture.restype = ctypes.c_uint32
released.gpumem_hook_stacks.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
released.gpumem_hook_stack_count.restype = ctypes.c_uint32
released.gpumem_hook_stack_text.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int]
assert released.gpumem_hook_stacks(1, 0) == 0
HERE = os.path.abspath(__file__)


def text(k):
    buf = ctypes.create_string_buffer(16384)
    assert released.gpumem_hook_stack_text(k, buf, len(buf)) >= 0
    return [line.split("\t") for line in buf.value.decode().splitlines()]


def line_of(fn, code):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, l in enumerate(lines) if code in l)


def inner(lib):
    return lib.gpumem_pystack_capture()  # the allocation


def outer(lib):
    return inner(lib)  # the call


class Capture(unittest.TestCase):
    def test_frames_innermost_first_with_their_lines_and_functions(self):
        k = outer(released)
        frames = text(k)
        self.assertEqual(frames[0], [HERE, str(line_of(inner, "the allocation")), "inner"])
        self.assertEqual(frames[1], [HERE, str(line_of(outer, "the call")), "outer"])
        self.assertEqual(frames[2][2], "Capture.test_frames_innermost_first_with_their_lines_and_functions")
        self.assertLessEqual(len(frames), 16)

    def test_one_id_per_stack_with_or_without_the_gil(self):
        a = [outer(released) for _ in range(3)]  # one line, one stack
        b = outer(released)  # another line of the caller: another stack
        self.assertEqual(len(set(a)), 1)
        self.assertNotEqual(a[0], b)
        self.assertNotEqual(outer(held), 0)

    def test_threads_capturing_at_once_get_consistent_ids(self):
        sites = [lambda: inner(released), lambda: outer(released), lambda: inner(held), lambda: outer(held)]
        seen = [set() for _ in sites]
        errors = []

        def work(t):
            try:
                for n in range(2000):
                    i = (n + t) % len(sites)
                    seen[i].add(sites[i]())
            except Exception as e:  # pragma: no cover - a failure is the test's result
                errors.append(e)

        before = released.gpumem_hook_stack_count()
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # each site from each thread: the frames below work() are the same; the thread's own
        # bootstrap frames too (threading.py), so a site has one stack whichever thread ran it
        for ids in seen:
            self.assertEqual(len(ids), 1, ids)
            self.assertNotIn(0, ids)
        self.assertEqual(released.gpumem_hook_stack_count() - before, len({i for ids in seen for i in ids}))


class Failure(unittest.TestCase):
    def test_a_failing_read_turns_stacks_off_in_the_hook_and_says_so(self):
        # As the agent wires it: start and reads guarded as "stacks", the hook's capture the stop.
        from gpumem_agent.guard import Guard
        from gpumem_agent.wire import FEATURE_ALLOC_STACKS

        notes = {}
        guard = Guard(notes)
        hook = ctypes.CDLL(LIB)
        hook.gpumem_pystack_min_bytes.restype = ctypes.c_uint64
        s = guard.call("stacks", stacks.start, hook, FEATURE_ALLOC_STACKS, {stacks.ENV: "2M"}, notes)
        self.assertIsNotNone(s)
        guard.stops("stacks", lambda: stacks.set_stacks(hook, 0, 0))
        self.assertEqual(hook.gpumem_pystack_min_bytes(), 2 << 20)

        def broken():
            raise OSError(5, "the table is gone")

        s.read_new = broken
        self.assertIsNone(guard.call("stacks", s.read_new))
        self.assertEqual(notes["stacks"], "off: OSError: [Errno 5] the table is gone")
        self.assertEqual(hook.gpumem_pystack_min_bytes(), 0)  # the hook captures no more
        self.assertIsNone(guard.call("stacks", s.manifest))  # and the manifest says none
        self.assertEqual(released.gpumem_hook_stacks(1, 0), 0)  # on again for the other tests


class Settings(unittest.TestCase):
    def test_on_by_default_off_by_zero_a_threshold_and_a_rate(self):
        d = (stacks.DEFAULT_MIN_BYTES, stacks.DEFAULT_SAMPLE_BYTES)
        self.assertEqual(d, (1 << 20, 512 << 10))
        self.assertEqual(stacks.settings({}), d)
        cases = {"": d, "on": d, " ON ": d, "0": (0, 0), "off": (0, 0), "1M": (1 << 20, 512 << 10), "512K": (512 << 10, 512 << 10),
                 "2G": (2 << 30, 512 << 10), "4096": (4096, 512 << 10), "1M:256K": (1 << 20, 256 << 10), "4M:0": (4 << 20, 0)}
        self.assertEqual({v: stacks.settings({stacks.ENV: v}) for v in cases}, cases)
        self.assertEqual(stacks.threshold({stacks.ENV: "2M:64K"}), 2 << 20)

    def test_a_value_that_is_not_a_size_is_said_and_leaves_stacks_off(self):
        for v in ("lots", "-1M", "1.5M", "1M:", "1M:fast", ":512K", "1M:2:3"):
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(stacks.settings({stacks.ENV: v}), (0, 0))
            self.assertEqual(err.getvalue(), "gpumem-agent: GPUMEM_TUI_STACKS=%s is not a size in bytes, or a size and a sampling rate "
                             "(such as 1M or 1M:512K); stacks are off\n" % v)
            err = io.StringIO()
            with redirect_stderr(err):  # the hook's build asks too, quietly: the agent says it once
                self.assertEqual(stacks.threshold({stacks.ENV: v}, quiet=True), 0)
            self.assertEqual(err.getvalue(), "")

    def test_under_python_minus_E_the_variable_is_not_read_and_the_defaults_apply(self):
        import subprocess

        code = ("import sys; sys.path.insert(0, %r); from gpumem_agent import stacks, trust; print(stacks.settings(trust.environ()))"
                % os.path.join(os.path.dirname(HERE), "..", "..", "agent"))
        for flag in ("-E", "-I"):
            out = subprocess.run([sys.executable, flag, "-c", code], env=dict(os.environ, GPUMEM_TUI_STACKS="0"), capture_output=True, text=True)
            self.assertEqual((out.stdout, out.stderr), ("(%d, %d)\n" % (1 << 20, 512 << 10), ""), flag)

    def test_a_hook_without_the_walker_leaves_stacks_off_and_says_which_python_once(self):
        for hook, features in ((None, 0), (released, 0)):
            for env in ({}, {stacks.ENV: "1M"}):  # on by default: said without being asked for
                notes = {}
                self.assertIsNone(stacks.start(hook, features, env, notes))
                self.assertEqual(notes, {"stacks": "off: this build of the hook captures no Python stacks (it needs this interpreter's headers, "
                                                   "Python.h, and Python 3.11 to 3.14 with the GIL; Python %d.%d here)" % sys.version_info[:2]})
        notes = {}
        self.assertIsNone(stacks.start(released, 0, {stacks.ENV: "0"}, notes))  # turned off: nothing to say
        self.assertEqual(notes, {})

    def test_on_the_hook_takes_the_threshold_and_rate_and_the_manifest_says_both(self):
        from gpumem_agent.wire import FEATURE_ALLOC_STACKS

        hook = ctypes.CDLL(LIB)
        for f in ("gpumem_pystack_min_bytes", "gpumem_pystack_sample_bytes"):
            getattr(hook, f).restype = ctypes.c_uint64
        try:
            for env, want in (({}, (1 << 20, 512 << 10)), ({stacks.ENV: "2M:128K"}, (2 << 20, 128 << 10)), ({stacks.ENV: "3M:0"}, (3 << 20, 0))):
                notes = {}
                s = stacks.start(hook, FEATURE_ALLOC_STACKS, env, notes)
                self.assertEqual(notes, {})  # notes say what runs without: stacks on say nothing there
                self.assertEqual((hook.gpumem_pystack_min_bytes(), hook.gpumem_pystack_sample_bytes()), want)
                m = s.manifest()
                self.assertEqual((m["stack_min_bytes"], m["stack_sample_bytes"]), want)
            self.assertEqual(stacks.manifest_off(), {"stack_min_bytes": 0, "stack_sample_bytes": 0, "stacks": {}})
        finally:
            self.assertEqual(released.gpumem_hook_stacks(1, 0), 0)  # every allocation, as the other tests want


class ManifestPace(unittest.TestCase):
    def test_new_stacks_rewrite_the_manifest_at_once_then_spaced_by_what_a_write_took(self):
        s = stacks.Stacks(released, 1 << 20, 512 << 10)
        self.assertFalse(s.due(False, 0.0))  # nothing new: nothing to write
        self.assertTrue(s.due(True, 0.0))  # the first: at once
        s.written(0.0, 0.02)  # a write of 20 ms: the next for stacks alone 2 s later (1% of the time)
        self.assertFalse(s.due(True, 1.0))
        self.assertFalse(s.due(False, 1.9))
        self.assertTrue(s.due(False, 2.0))  # the stacks read at 1.0 are still to be written
        s.written(2.0, 0.0)
        self.assertFalse(s.due(False, 3.0))


# --- sampling by bytes, through the hook double ---------------------------------------------------

ALLOC = 0


def sizes_in(rng, lo, hi):
    """A size log-uniform in [lo, hi), rounded to 512 bytes as the allocator rounds."""
    return max(512, int(2 ** rng.uniform(lo, hi)) // 512 * 512)


class Stream:
    """Allocations from known lines of this file, through the double as PyTorch's allocator calls the
    hook (the GIL released), into a real ring read back as the monitor reads it."""

    def __init__(self, tmp, min_bytes, sample_bytes):
        from gpumem_agent import ring

        self.ring = ring.Ring(os.path.join(tmp, "stream.ring"), capacity=1 << 16, n_devices=1)
        self.lane = self.ring.lane_of(0)
        self.read_to = self.ring.lane_written(self.lane)
        assert released.gpumem_hook_attach(self.ring.path.encode(), 0) == 0
        assert released.gpumem_hook_stacks(min_bytes, sample_bytes) == 0
        released.gpumem_double_events.argtypes = [ctypes.c_uint8, ctypes.c_int8, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32]
        self.taken = []  # (stack id, size) of each alloc record that carries a stack
        self.records = 0

    def read(self):
        """The records written since the last read (before the ring laps: read every 50,000)."""
        from gpumem_agent.ring import RECORD_FIELDS

        act, size, extra = (RECORD_FIELDS.index(f) for f in ("action", "size", "extra"))
        recs = self.ring.lane_records(self.lane, self.read_to)
        self.read_to += len(recs)
        self.records += len(recs)
        self.taken += [(r[extra], r[size]) for r in recs if r[act] == ALLOC and r[extra]]

    def close(self):
        released.gpumem_hook_detach()
        self.ring.close()
        assert released.gpumem_hook_stacks(1, 0) == 0


def line_small(evs, sizes):
    evs(ALLOC, 0, 0x1000, sizes, len(sizes))  # small


def line_mixed(evs, sizes):
    evs(ALLOC, 0, 0x2000, sizes, len(sizes))  # mixed


def line_around(evs, sizes):
    evs(ALLOC, 0, 0x3000, sizes, len(sizes))  # around


def line_edge(evs, sizes):
    evs(ALLOC, 0, 0x4000, sizes, len(sizes))  # edge


LINES = {  # each line's sizes: log2 bounds
    line_small: (12, 18),  # 4 KiB .. 256 KiB: all sampled
    line_mixed: (9, 22),  # 512 B .. 4 MiB: both sides of the threshold
    line_around: (18, 21),  # 256 KiB .. 2 MiB
    line_edge: None,  # just below and at the threshold
}


class Sampling(unittest.TestCase):
    """A sampled allocation of s bytes below the threshold stands for s / (1 - exp(-s / rate))
    bytes; at or above it for s (docs/protocol.md): bytes per line so weighted are the true bytes."""

    def stream(self, n, min_bytes, sample_bytes, seed=37):
        import random
        import tempfile

        rng = random.Random(seed)
        # Allocation i of line i % 4 (LINES' order), the edge line alternating below and at the
        # threshold every fourth; the sizes sizes_in's, drawn in that order from the one generator
        # (uniform(lo, hi) is lo + (hi - lo) * random(), written out: it runs a million times on
        # each interpreter). Each line's allocations of a stretch of 50,000 go to the double in one
        # call from that line, as an op making many blocks calls the hook, each sampled one walked
        # from that line's frame: a Python call around each of a million was most of the test's
        # time. Sampling counts down bytes, whichever line's allocation comes next.
        assert n % 4 == 0 and list(LINES) == [line_small, line_mixed, line_around, line_edge]
        (s_lo, s_hi), (m_lo, m_hi), (a_lo, a_hi) = LINES[line_small], LINES[line_mixed], LINES[line_around]
        s_w, m_w, a_w = s_hi - s_lo, m_hi - m_lo, a_hi - a_lo
        rnd = rng.random
        edge = (min_bytes - 512, min_bytes)
        t_small = t_mixed = t_around = t_edge = 0
        with tempfile.TemporaryDirectory() as tmp:
            st = Stream(tmp, min_bytes, sample_bytes)
            try:
                evs = released.gpumem_double_events
                for start in range(0, n, 50000):  # read every 50,000, before the ring laps
                    small, mixed, around, edges = [], [], [], []
                    for j in range(start >> 2, min(start + 50000, n) >> 2):
                        small.append(max(512, int(2 ** (s_lo + s_w * rnd())) // 512 * 512))
                        mixed.append(max(512, int(2 ** (m_lo + m_w * rnd())) // 512 * 512))
                        around.append(max(512, int(2 ** (a_lo + a_w * rnd())) // 512 * 512))
                        edges.append(edge[j & 1])
                    for line, sizes in ((line_small, small), (line_mixed, mixed), (line_around, around), (line_edge, edges)):
                        line(evs, (ctypes.c_uint64 * len(sizes))(*sizes))
                    t_small, t_mixed, t_around, t_edge = t_small + sum(small), t_mixed + sum(mixed), t_around + sum(around), t_edge + sum(edges)
                    st.read()
            finally:
                st.close()
        true = {"line_small": t_small, "line_mixed": t_mixed, "line_around": t_around, "line_edge": t_edge}
        self.assertEqual(st.records, n)  # every allocation recorded, none lost to a lapped ring
        return true, st.taken

    def by_line(self, taken, weight):
        """Weighted bytes per function of this file, by the innermost frame of each stack."""
        import math

        names, out = {}, {}
        for k, size in taken:
            if k not in names:
                names[k] = text(k)[0][2]
            out[names[k]] = out.get(names[k], 0) + weight(size, math)
        return out

    def test_a_million_allocations_bytes_per_line_within_5_percent(self):
        min_bytes, rate = stacks.DEFAULT_MIN_BYTES, stacks.DEFAULT_SAMPLE_BYTES
        true, taken = self.stream(1000000, min_bytes, rate)
        est = self.by_line(taken, lambda s, m: s if s >= min_bytes else s / -m.expm1(-s / rate))
        self.assertEqual(set(est), set(true))
        for name, t in true.items():
            self.assertLess(abs(est[name] - t) / t, 0.05, "%s: %d sampled-weighted bytes against %d true" % (name, est[name], t))
        # far fewer walks than allocations: the small line's are about its bytes / rate
        small = sum(1 for k, s in taken if s < min_bytes)
        self.assertLess(small, 0.6 * 1000000)
        self.assertGreater(sum(1 for _ in taken), 0)

    def test_at_or_above_the_threshold_every_allocation_and_none_below_without_a_rate(self):
        min_bytes = 1 << 20
        true, taken = self.stream(40000, min_bytes, 0)
        self.assertTrue(all(s >= min_bytes for _, s in taken))
        exact = self.by_line(taken, lambda s, m: s)
        # line_edge alternates 1 MiB - 512 and 1 MiB: exactly its 1 MiB ones
        self.assertEqual(exact["line_edge"], (40000 // 4 // 2) * min_bytes)
        self.assertNotIn("line_small", exact)

    def test_stacks_off_through_the_hook_no_allocation_carries_one(self):
        _, taken = self.stream(20000, 0, 0)
        self.assertEqual(taken, [])


# --- which frames are kept -------------------------------------------------------------------------

_LIB = {}
exec(compile("def lib_depth(d, fn):\n    return fn() if d <= 1 else lib_depth(d - 1, fn)\n",
             "/usr/lib/python3/dist-packages/stacks_test_model.py", "exec"), _LIB)


def deep_user():
    return _LIB["lib_depth"](40, released.gpumem_pystack_capture)  # the user's call into the library


exec(compile("def own_depth(d, fn):\n    return fn() if d <= 1 else own_depth(d - 1, fn)\n", "/srv/proj/mylib/model.py", "exec"), _LIB)
exec(compile("def acme_step(fn):\n    return _LIB['lib_depth'](40, fn)  # acme's call\n", "/opt/venv/lib/python3/site-packages/acme/train.py", "exec"),
     dict(_LIB=_LIB, __builtins__=__builtins__), _LIB)


def deep_own():
    return _LIB["own_depth"](40, released.gpumem_pystack_capture)  # the call into the user's own library


def with_rule(library="", user=""):
    """The hook's rule set (stacks off while it is: the hook refuses otherwise), stacks on again."""
    assert released.gpumem_hook_stacks(0, 0) == 0
    released.gpumem_hook_stack_rule.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    rc = released.gpumem_hook_stack_rule(library.encode(), user.encode())
    assert released.gpumem_hook_stacks(1, 0) == 0
    return rc


class Frames(unittest.TestCase):
    def tearDown(self):
        self.assertEqual(with_rule(), 0)

    def test_code_the_user_names_library_or_theirs_is_taken_so_by_the_walk(self):
        # a library of the user's own checkout is the user's code by default: its innermost 16 frames
        frames = text(deep_own())
        self.assertEqual({f[0] for f in frames}, {"/srv/proj/mylib/model.py"})
        # named library code (GPUMEM_TUI_LIBRARY=mylib): the walk goes on to the line that calls it
        self.assertEqual(with_rule(library="mylib"), 0)
        frames = text(deep_own())
        self.assertEqual(frames[11], ["\u2026", "0", "29 frames left out"])
        self.assertEqual(frames[12], [HERE, str(line_of(deep_own, "the call into")), "deep_own"])
        # an installed package named the user's (GPUMEM_TUI_USER_CODE=acme): its frame is the one kept
        self.assertEqual(with_rule(user="acme"), 0)
        frames = text(_LIB["acme_step"](released.gpumem_pystack_capture))
        self.assertEqual(frames[11], ["\u2026", "0", "29 frames left out"])
        self.assertEqual(frames[12][0::2], ["/opt/venv/lib/python3/site-packages/acme/train.py", "acme_step"])
        # the rule is set only while no walk can read it
        self.assertEqual(released.gpumem_hook_stack_rule(b"x", b""), -16)  # -EBUSY: stacks are on

    def test_the_agent_passes_the_monitors_rule_variables_and_says_one_too_long(self):
        self.assertEqual(stacks.rule_entries(" accelerate:/opt/shared/, my.lib ,bad entry!,, "), ["accelerate", "/opt/shared/", "my.lib"])
        from gpumem_agent.wire import FEATURE_ALLOC_STACKS

        hook = ctypes.CDLL(LIB)
        notes, err = {}, io.StringIO()
        with redirect_stderr(err):
            s = stacks.start(hook, FEATURE_ALLOC_STACKS, {stacks.LIBRARY_ENV: "mylib", stacks.ENV: "1:0"}, notes)
        self.assertIsNotNone(s)
        self.assertEqual((notes, err.getvalue()), ({}, ""))
        self.assertEqual(text(deep_own())[12][2], "deep_own")  # the agent set GPUMEM_TUI_LIBRARY's entry
        with redirect_stderr(err):
            s = stacks.start(hook, FEATURE_ALLOC_STACKS, {stacks.USER_CODE_ENV: ":".join(["pkg%04d" % i for i in range(1000)]), stacks.ENV: "1:0"}, notes)
        self.assertIsNotNone(s)  # stacks stay on, by the default rule
        self.assertEqual({f[0] for f in text(deep_own())}, {"/srv/proj/mylib/model.py"})
        self.assertEqual(err.getvalue(), "gpumem-agent: GPUMEM_TUI_LIBRARY and GPUMEM_TUI_USER_CODE are longer than the hook keeps (4 KiB each); "
                         "it keeps frames by the default rule, the monitor names lines by yours\n")
        self.assertEqual(notes, {})


    def test_the_users_line_below_many_library_frames_is_kept_after_the_innermost_and_a_gap(self):
        frames = text(deep_user())
        self.assertEqual(len(frames), 16)
        # the innermost 11, all the library's; then one frame for the 29 others left out
        self.assertEqual({f[0] for f in frames[:11]}, {"/usr/lib/python3/dist-packages/stacks_test_model.py"})
        self.assertEqual(frames[11], ["\u2026", "0", "29 frames left out"])
        self.assertEqual(frames[12], [HERE, str(line_of(deep_user, "the user's call")), "deep_user"])
        self.assertEqual(frames[13][2], "Frames.test_the_users_line_below_many_library_frames_is_kept_after_the_innermost_and_a_gap")

if __name__ == "__main__":
    unittest.main()
