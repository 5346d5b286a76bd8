"""The line profiler's parts that need no torch: splitting allocator records between lines, and the
tracer that tells the ring which line runs (Python's own line events, on a real ring file). The
exact bytes on a real GPU are test/agent/gpu.test.ts's "lines" scenario."""
import os
import struct
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent import ring, wire  # noqa: E402
from gpumem_agent.lines import CUR_LINE, LineStats, Profiler, attribute, block_size  # noqa: E402

A = wire.ACTION
MiB = 1 << 20


def rec(index, action, size, device=0, line=0):
    # seq time address size stream extra step range action device phase flags line
    return (index + 1, 0, 0, size, 0, 0, 0, 0, A[action], device, 0, 0, line)


class Attribute(unittest.TestCase):
    def test_bytes_peaks_and_hits_per_line(self):
        # Line 10 allocates 3 MiB then 1 MiB; line 11 frees the 1 MiB; line 12 allocates nothing;
        # line 10 runs again (a loop) and allocates 512 bytes for a 100-byte request.
        log = [("L10", 0), ("L11", 2), ("L12", 4), ("L10", 4)]
        records = [
            rec(0, "alloc", 3 * MiB),
            rec(1, "alloc", MiB),
            rec(2, "free_requested", MiB),
            rec(3, "free_completed", MiB),
            rec(4, "alloc", 100),
            rec(5, "segment_alloc", 20 * MiB, device=1),  # another device: not this profile's
        ]
        stats = {}
        active, reserved = attribute(records, log, 6, 0, 10 * MiB, 20 * MiB, stats)
        self.assertEqual(active, 13 * MiB + 512)
        self.assertEqual(reserved, 20 * MiB)
        self.assertEqual(stats["L10"].hits, 2)
        self.assertEqual(stats["L10"].alloc_bytes, 4 * MiB + 512)
        self.assertEqual(stats["L10"].peak_active, 14 * MiB)
        self.assertEqual(stats["L11"].freed_bytes, MiB)
        self.assertEqual(stats["L11"].peak_active, 14 * MiB)  # it began at 14 MiB
        self.assertEqual(stats["L12"].alloc_bytes, 0)
        self.assertEqual(stats["L12"].peak_active, 13 * MiB)  # the level while it ran
        self.assertEqual(stats["L12"].hits, 1)

    def test_block_size_is_the_allocators(self):
        self.assertEqual([block_size(x) for x in (0, 1, 512, 513, 1024)], [0, 512, 512, 1024, 1024])


class FakeCuda:
    """Stands in for torch.cuda where there is no GPU: device 0, nothing allocated."""

    def current_device(self):
        return 0

    def memory_stats(self, device):
        return {"active_bytes.all.current": 0, "reserved_bytes.all.current": 0}

    def init(self):
        pass


class Tracer(unittest.TestCase):
    """The tracer on a real ring file: inside a profiled function the header names the line that
    runs, and records written during a line (as the hook writes them) land on that line."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.ring = ring.Ring(os.path.join(self.dir, "t.ring"), capacity=1024)
        self.agent = types.SimpleNamespace(ring=self.ring, mode="hook", started=True, active=True, hook_error=None,
                                           torch=types.SimpleNamespace(cuda=FakeCuda()))
        self.profiler = Profiler(lambda: self.agent)
        self.profiler._printed = True  # no table at the test's exit

    def tearDown(self):
        self.ring.close()

    def push(self, action, size, lane=1):
        """One record of device 0 as the hook writes it (into device 0's own lane, lane 1): the
        header's current line stamped on it. A mark in the shared lane (lane 0) as well, which the
        profiler must not take for the device's."""
        m = self.ring.map
        at = ring.write_index_offset(lane)
        w = struct.unpack_from("<Q", m, at)[0]
        line = struct.unpack_from("<I", m, CUR_LINE)[0]
        base = ring.HEADER_SIZE + lane * self.ring.capacity * ring.RECORD_SIZE
        ring.RECORD.pack_into(m, base + (w % self.ring.capacity) * ring.RECORD_SIZE,
                              w + 1, 0, 0x1000 + w * 512, size, 0, 0, 0, 0, A[action], 0, 0, 0, line)
        struct.pack_into("<Q", m, at, w + 1)
        if lane == 1:
            self.push("phase", 0, lane=0)
        return line

    def test_each_line_gets_its_records_and_the_header_names_it(self):
        seen = []

        def step(n):
            seen.append(self.push("alloc", 2 * MiB))  # first
            for _ in range(n):
                seen.append(self.push("alloc", MiB))  # in the loop
            seen.append(self.push("free_requested", 2 * MiB))  # last
            return n

        first = step.__code__.co_firstlineno
        profiled = self.profiler.wrap(step)
        self.assertEqual(profiled(3), 3)
        self.assertEqual(struct.unpack_from("<I", self.ring.map, CUR_LINE)[0], 0)  # reset after the call
        ids = self.profiler.line_ids
        self.assertEqual(seen, [ids[(__file__, first + 1)]] + [ids[(__file__, first + 3)]] * 3 + [ids[(__file__, first + 4)]])
        lines = profiled.gpumem_profile.lines
        self.assertEqual(lines[first + 1].alloc_bytes, 2 * MiB)
        self.assertEqual(lines[first + 3].alloc_bytes, 3 * MiB)
        self.assertEqual(lines[first + 3].hits, 3)
        self.assertEqual(lines[first + 3].peak_active, 5 * MiB)
        self.assertEqual(lines[first + 4].freed_bytes, 2 * MiB)
        self.assertEqual(profiled.gpumem_profile.profiled_calls, 1)
        # The names the manifest gives the monitor.
        self.assertTrue(self.profiler.line_names[str(ids[(__file__, first + 3)])].endswith('seen.append(self.push("alloc", MiB))  # in the loop'))
        table = self.profiler.format()
        self.assertIn("## Tracer.test_each_line_gets_its_records_and_the_header_names_it.<locals>.step", table)
        self.assertRegex(table, r"\s+%d\s+5\.00 MiB\s+0 B\s+3\.00 MiB\s+0 B\s+3  " % (first + 3))

    def test_every_nth_call_and_code_outside_pays_nothing(self):
        calls = []

        def f():
            calls.append(struct.unpack_from("<I", self.ring.map, CUR_LINE)[0])

        g = self.profiler.wrap(f, every=3)
        for _ in range(6):
            g()
        self.assertEqual([c != 0 for c in calls], [True, False, False, True, False, False])
        self.assertEqual(g.gpumem_profile.calls, 6)
        self.assertEqual(g.gpumem_profile.profiled_calls, 2)
        self.assertIsNone(sys.gettrace())  # nothing left tracing

    def test_bad_uses_say_so(self):
        with self.assertRaisesRegex(ValueError, "positive integer"):
            self.profiler.wrap(lambda: 0, every=0)

        def gen():
            yield 1

        with self.assertRaisesRegex(TypeError, "generator or coroutine"):
            self.profiler.wrap(gen)

    def test_a_profiler_that_fails_never_breaks_the_program(self):
        import io

        def broken_stats(device):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

        self.agent.torch.cuda.memory_stats = broken_stats
        err = io.StringIO()
        old, sys.stderr = sys.stderr, err
        try:
            f = self.profiler.wrap(lambda x: x * 2)
            self.assertEqual([f(1), f(2)], [2, 4])  # ran, once each, unprofiled

            def raises():
                raise KeyError("mine")

            with self.assertRaises(KeyError):  # the program's own exception, untouched
                self.profiler.wrap(raises)()
        finally:
            sys.stderr = old
        self.assertEqual(err.getvalue().count("could not start: RuntimeError: CUDA error"), 1)
        self.assertIsNone(sys.gettrace())
        self.assertEqual(self.profiler.depth, 0)

    def test_a_line_after_the_ring_closed_does_not_raise(self):
        def f():
            self.ring.map.close()  # the agent closing at exit while a decorated call still runs
            return "done"

        self.assertEqual(self.profiler.wrap(f)(), "done")

    def test_without_the_hook_it_runs_and_says_why_once(self):
        self.agent.mode = "polling"
        self.agent.hook_error = "no compiler"
        import io

        err = io.StringIO()
        old, sys.stderr = sys.stderr, err
        try:
            f = self.profiler.wrap(lambda: 42)
            self.assertEqual([f(), f()], [42, 42])
        finally:
            sys.stderr = old
        self.assertEqual(err.getvalue().count("lines cannot be attributed"), 1)
        self.assertIn("no compiler", err.getvalue())


try:
    import IPython  # noqa: F401

    HAVE_IPYTHON = True
except ImportError:
    HAVE_IPYTHON = False


@unittest.skipUnless(HAVE_IPYTHON, "needs IPython")
class Magics(unittest.TestCase):
    """%%gpumem in a real IPython shell: the cell's own lines are profiled, its names stay."""

    def setUp(self):
        self.t = Tracer("test_bad_uses_say_so")
        self.t.setUp()

    def tearDown(self):
        self.t.tearDown()

    def test_a_cell_profiled_by_line(self):
        import io

        import gpumem_agent
        from IPython.core.interactiveshell import InteractiveShell

        gpumem_agent._profiler = self.t.profiler  # the profiler on this test's ring
        self.push = self.t.push
        ip = InteractiveShell.instance()
        ip.run_line_magic("load_ext", "gpumem_agent")
        ip.user_ns["push"] = self.push
        out = io.StringIO()
        old, sys.stdout = sys.stdout, out
        try:
            ip.run_cell_magic("gpumem", "", 'a = push("alloc", 4 << 20)\nb = [push("alloc", 1 << 20) for _ in range(3)]\n')
            ip.run_line_magic("gpumem", 'c = push("alloc", 2 << 20)')
        finally:
            sys.stdout = old
        text = out.getvalue()
        self.assertIn("%%gpumem cell 1", text)
        self.assertRegex(text, r"\n\s+1\s+4\.00 MiB\s+0 B\s+4\.00 MiB\s+0 B\s+1  a = push")
        self.assertRegex(text, r"\n\s+2\s+7\.00 MiB\s+0 B\s+3\.00 MiB\s+0 B\s+\d+  b = \[push")
        self.assertRegex(text, r"\s+1\s+2\.00 MiB\s+0 B\s+2\.00 MiB\s+0 B\s+1  c = push")
        self.assertIn("c", ip.user_ns)  # the statement ran in the user's namespace


if __name__ == "__main__":
    unittest.main()
