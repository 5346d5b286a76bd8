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
released.gpumem_hook_stacks.argtypes = [ctypes.c_uint64]
released.gpumem_hook_stack_count.restype = ctypes.c_uint32
released.gpumem_hook_stack_text.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int]
assert released.gpumem_hook_stacks(1) == 0
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
        guard.stops("stacks", lambda: hook.gpumem_hook_stacks(0))
        self.assertEqual(hook.gpumem_pystack_min_bytes(), 2 << 20)

        def broken():
            raise OSError(5, "the table is gone")

        s.read_new = broken
        self.assertIsNone(guard.call("stacks", s.read_new))
        self.assertEqual(notes["stacks"], "off: OSError: [Errno 5] the table is gone")
        self.assertEqual(hook.gpumem_pystack_min_bytes(), 0)  # the hook captures no more
        self.assertIsNone(guard.call("stacks", s.manifest))  # and the manifest says none
        self.assertEqual(released.gpumem_hook_stacks(1), 0)  # on again for the other tests


class Threshold(unittest.TestCase):
    def test_sizes_and_off(self):
        self.assertEqual([stacks.threshold({stacks.ENV: v}) for v in ("1M", "512K", "2G", "4096", "0", "off", "")],
                         [1 << 20, 512 << 10, 2 << 30, 4096, 0, 0, 0])
        self.assertEqual(stacks.threshold({}), 0)

    def test_a_value_that_is_not_a_size_is_said_and_leaves_stacks_off(self):
        for v in ("lots", "-1M", "1.5M"):
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(stacks.threshold({stacks.ENV: v}), 0)
            self.assertEqual(err.getvalue(), "gpumem-agent: GPUMEM_TUI_STACKS=%s is not a size in bytes (such as 1M); stacks are off\n" % v)
            err = io.StringIO()
            with redirect_stderr(err):  # the hook's build asks too, quietly: the agent says it once
                self.assertEqual(stacks.threshold({stacks.ENV: v}, quiet=True), 0)
            self.assertEqual(err.getvalue(), "")

    def test_a_hook_without_the_walker_leaves_stacks_off_and_says_which_python(self):
        for hook, features in ((None, 0), (released, 0)):
            notes = {}
            self.assertIsNone(stacks.start(hook, features, {stacks.ENV: "1M"}, notes))
            self.assertEqual(notes["stacks"], "off: this build of the hook captures no Python stacks (it needs this interpreter's headers, "
                             "Python.h, and Python 3.11 to 3.13 with the GIL; Python %d.%d here)" % sys.version_info[:2])
        notes = {}
        self.assertIsNone(stacks.start(released, 0, {}, notes))  # not asked for: nothing said
        self.assertEqual(notes, {})


if __name__ == "__main__":
    unittest.main()
