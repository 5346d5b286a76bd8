"""Each step's input shape and the allocator's limit (inputs.py), made to fail or skipped: the first
tensor argument is found positional first, then by keyword; one record a step; nothing inside a
torch.compile trace; a failing write turns the feature off in one note and never reaches the
program; the program's set_per_process_memory_fraction passes through the wrapper untouched, its
errors too, and gets its own back when the feature stops. On a torch stand-in (standard library
only: no allocator here, so no tensor double either); run by test/agent/inputs.test.ts."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent"))

from gpumem_agent import inputs  # noqa: E402
from gpumem_agent.guard import Guard  # noqa: E402
from gpumem_agent.phases import Phases  # noqa: E402
from gpumem_agent.wire import ACTION  # noqa: E402

GIB = 1 << 30


class Tensor:
    def __init__(self, *shape, cuda=True, index=0):
        self.shape = shape
        self.is_cuda = cuda
        self.device = types.SimpleNamespace(index=index)


class Module:
    """A module as far as the phase hooks look (they keep weak references)."""


class BadShape(Tensor):
    @property
    def shape(self):
        raise RuntimeError("a shape that cannot be read")

    @shape.setter
    def shape(self, v):
        pass


def fake_torch(getter=None):
    calls = []

    def setter(fraction, device=None):
        if not 0 <= fraction <= 1:
            raise ValueError("invalid fraction: %s" % fraction)
        calls.append((fraction, device))

    memory = types.SimpleNamespace(set_per_process_memory_fraction=setter)
    cuda = types.SimpleNamespace(
        set_per_process_memory_fraction=setter,
        memory=memory,
        current_device=lambda: 0,
        get_device_properties=lambda i: types.SimpleNamespace(total_memory=80 * GIB),
    )
    if getter is not None:
        cuda.get_per_process_memory_fraction = getter
    torch = types.SimpleNamespace(Tensor=Tensor, cuda=cuda, device=lambda d: types.SimpleNamespace(index=int(str(d).split(":")[-1])))
    return torch, calls


def made(torch, fail=False, compiling=False):
    records, notes = [], {}

    def write(*r):
        records.append(r)
        if fail:
            raise OSError(5, "the ring is gone")

    i = inputs.Inputs(torch, write, Guard(notes), (lambda: True) if compiling else None).install()
    return i, records, notes


class Inputs(unittest.TestCase):
    def test_the_first_tensor_argument_positional_then_by_keyword_once_a_step(self):
        torch, _ = fake_torch()
        i, records, notes = made(torch)
        ids = Tensor(16, 256)
        i.at_forward(1, (), {"attention_mask": None, "input_ids": ids, "labels": Tensor(16, 256)})
        i.at_forward(1, (Tensor(4, 4),), {})  # a second forward in the step (micro-batch): not said again
        i.at_forward(2, ("text", Tensor(8, 3, 224, 224)), {"x": ids})
        i.at_forward(3, (Tensor(32),), {})
        i.at_forward(4, ([ids],), {})  # nothing at the top level: nothing said, nothing walked
        self.assertEqual(records, [
            (ACTION["input"], 0, 256, 16, 16 * 256),
            (ACTION["input"], 0, 3, 8, 8 * 3 * 224 * 224),
            (ACTION["input"], 0, 0, 32, 32),
        ])
        self.assertEqual(notes, {})

    def test_a_cpu_tensor_and_a_traced_region_say_nothing(self):
        torch, _ = fake_torch()
        i, records, _ = made(torch)
        i.at_forward(1, (Tensor(2, 2, cuda=False),), {})
        j, traced, _ = made(torch, compiling=True)
        j.at_forward(1, (Tensor(2, 2),), {})
        self.assertEqual((records, traced), ([], []))

    def test_a_failing_write_turns_the_feature_off_once_and_gives_the_setter_back(self):
        torch, calls = fake_torch()
        original = torch.cuda.set_per_process_memory_fraction
        i, records, notes = made(torch, fail=True)
        self.assertIsNot(torch.cuda.set_per_process_memory_fraction, original)  # wrapped
        i.at_forward(1, (Tensor(2, 2),), {})  # raises inside: caught
        i.at_forward(2, (Tensor(2, 2),), {})
        self.assertEqual(len(records), 1)
        self.assertEqual(notes, {"inputs": "off: OSError: [Errno 5] the ring is gone"})
        self.assertIs(torch.cuda.set_per_process_memory_fraction, original)
        self.assertIs(torch.cuda.memory.set_per_process_memory_fraction, original)

    def test_an_unreadable_shape_is_caught(self):
        torch, _ = fake_torch()
        i, records, notes = made(torch)
        i.at_forward(1, (BadShape(),), {})
        self.assertEqual(records, [])
        self.assertEqual(notes, {"inputs": "off: RuntimeError: a shape that cannot be read"})

    def test_the_limit_follows_the_programs_calls_which_pass_through(self):
        torch, calls = fake_torch()
        i, records, notes = made(torch)
        torch.cuda.set_per_process_memory_fraction(0.25)
        torch.cuda.set_per_process_memory_fraction(0.25, 0)  # the same limit: said once
        torch.cuda.memory.set_per_process_memory_fraction(0.5, device="cuda:1")
        with self.assertRaisesRegex(ValueError, "invalid fraction: 2"):
            torch.cuda.set_per_process_memory_fraction(2)  # the program's own error, untouched
        torch.cuda.set_per_process_memory_fraction(1.0)  # the whole device: no limit of its own
        self.assertEqual(calls, [(0.25, None), (0.25, 0), (0.5, "cuda:1"), (1.0, None)])
        self.assertEqual(records, [
            (ACTION["limit"], 0, 0, 20 * GIB, 0),
            (ACTION["limit"], 1, 0, 40 * GIB, 0),
            (ACTION["limit"], 0, 0, 0, 0),
        ])
        self.assertEqual(notes, {})

    def test_a_limit_set_before_the_agent_is_read_where_torch_has_a_getter(self):
        torch, _ = fake_torch(getter=lambda d: 0.3)
        i, records, _ = made(torch)
        i.at_forward(1, (Tensor(2, 2),), {})
        i.at_forward(2, (Tensor(2, 2),), {})
        self.assertEqual(records, [(ACTION["input"], 0, 2, 2, 4), (ACTION["limit"], 0, 0, int(0.3 * 80 * GIB), 0), (ACTION["input"], 0, 2, 2, 4)])

    def test_the_phase_hooks_hand_the_outermost_call_with_its_keywords(self):
        marks, seen = [], []
        p = Phases(lambda *a: marks.append(a))
        p.on_input = lambda step, args, kwargs: seen.append((step, args, kwargs))
        outer, inner = Module(), Module()
        p.pre(outer, (1,), {"input_ids": 2})
        p.pre(inner, (3,))  # an inner module: not the input
        p.post(inner, (3,), None)
        p.post(outer, (1,), None)
        self.assertEqual(seen, [(0, (1,), {"input_ids": 2})])


if __name__ == "__main__":
    unittest.main()
