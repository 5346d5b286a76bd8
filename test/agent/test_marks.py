"""The mark-every-hook mode's hooks (marks.py) made to fail or skipped: a failing sync point turns
the mode off in one note and never reaches the program; inside a torch.compile trace nothing is
written; without a hook that writes sync points the mode says why and stays off. On the torch
double (torch_double.py), standard library only; run by test/agent/marks.test.ts."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))
import torch_double  # noqa: E402

torch = torch_double.install()

from gpumem_agent import marks  # noqa: E402
from gpumem_agent.guard import Guard  # noqa: E402
from gpumem_agent.wire import FEATURE_SYNC_POINTS, POINT  # noqa: E402


class Model(torch.nn.Module):
    def forward(self, x):
        out = torch.empty(4)
        out.requires_grad = True
        return out


def installed(write, compiling=False):
    notes = {}
    points = marks.SyncPoints(torch, write, Guard(notes))
    if compiling:
        points.compiling = lambda: True
    return points.install(), notes


class Marks(unittest.TestCase):
    def tearDown(self):
        for registry in (torch_double._global_pre, torch_double._global_post, torch_double._step_pre, torch_double._step_post):
            registry.clear()

    def test_a_failing_sync_point_turns_the_mode_off_once_and_the_program_goes_on(self):
        calls = []

        def write(point):
            calls.append(point)
            raise OSError(5, "the ring is gone")

        points, notes = installed(write)
        out = Model()(torch.empty(2))  # the forward runs and returns its output
        self.assertTrue(out.requires_grad)
        torch.autograd.backward(out)
        self.assertEqual(calls, [POINT["forward_pre"]])  # the first failure, then nothing
        self.assertEqual(notes, {"marks": "off: OSError: [Errno 5] the ring is gone"})
        self.assertFalse(points.on)
        self.assertEqual(torch_double._global_pre, [])  # the module hooks removed
        self.assertEqual(torch_double._global_post, [])

    def test_nothing_is_written_inside_a_compiled_region(self):
        calls = []
        points, notes = installed(calls.append, compiling=True)
        out = Model()(torch.empty(2))
        self.assertEqual(out._hooks, [])  # no tensor hook either
        self.assertEqual(calls, [])
        self.assertEqual(notes, {})

    def test_without_a_hook_or_with_an_older_one_the_mode_says_why_and_stays_off(self):
        class OldHook:
            pass

        for hook, features, words in ((None, 0, "no hook"), (OldHook(), 0, "an older hook")):
            notes = {}
            self.assertIsNone(marks.start(torch, hook, features, {"GPUMEM_TUI_MARKS": "hooks"}, notes, Guard(notes)))
            self.assertEqual(notes, {"marks": "off: GPUMEM_TUI_MARKS=hooks needs the allocator hook with sync points (this process has %s)" % words})
        notes = {}
        self.assertIsNone(marks.start(torch, None, FEATURE_SYNC_POINTS, {}, notes, Guard(notes)))  # not asked: nothing said
        self.assertEqual(notes, {})

    def test_inputs_and_outputs_one_level_deep(self):
        a, b = torch.empty(1), torch.empty(1)
        self.assertEqual(marks._tensors((a, b), torch), [a, b])  # a module's args, a block's tuple
        self.assertEqual(marks._tensors(a, torch), [a])
        self.assertEqual(marks._tensors((a, [b], {"x": b}), torch), [a])  # deeper: not walked
        self.assertEqual(marks._tensors({"loss": b, "n": 3}, torch), [b])


if __name__ == "__main__":
    unittest.main()
