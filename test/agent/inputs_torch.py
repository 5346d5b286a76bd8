"""The input's shape and the limit with real torch (a CPU build is enough; test/agent/inputs.test.ts
runs this under test/support/torch.ts's python): the phase hooks hand the outermost module's call to
inputs.py, positional from the first step, by keyword too once the models' own hooks (registered
with_kwargs) take over after the first optimizer step; inner modules never; the wrapped
set_per_process_memory_fraction passes torch's own error through untouched on a machine without
CUDA. Standard library and torch only."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "agent"))

import torch  # noqa: E402

from gpumem_agent import inputs  # noqa: E402
from gpumem_agent.guard import Guard  # noqa: E402
from gpumem_agent.phases import Phases  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 8)

    def forward(self, input_ids=None, labels=None):
        return self.inner(input_ids).sum()


class RealTorch(unittest.TestCase):
    def setUp(self):
        self.notes = {}
        self.phases = Phases(lambda *a: None, Guard(self.notes))
        self.phases.install(torch)
        self.seen = []
        self.phases.on_input = lambda step, args, kwargs: self.seen.append((step, [type(a).__name__ for a in args], sorted((kwargs or {}).keys())))

    def tearDown(self):
        self.phases.stop()
        for h in self.phases.opt_handles:
            h.remove()

    def test_the_outermost_call_by_keyword_once_the_models_hooks_take_over(self):
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.zeros(4, 8)
        for _ in range(3):
            net(input_ids=x, labels=x).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        net(x)  # positional
        # step 0 under the global hooks (no keywords reach them), then the model's own hooks
        self.assertEqual(self.seen, [(0, [], []), (1, [], ["input_ids", "labels"]), (2, [], ["input_ids", "labels"]), (3, ["Tensor"], [])])
        self.assertEqual(self.notes, {})

    def test_the_setter_passes_torchs_own_error_through(self):
        notes, records = {}, []
        i = inputs.Inputs(torch, lambda *r: records.append(r), Guard(notes)).install()
        try:
            self.assertIsNot(torch.cuda.set_per_process_memory_fraction, i.patched[0][2])
            if torch.cuda.is_available():
                self.skipTest("a CUDA device is here: the setter would succeed")
            with self.assertRaises(Exception) as caught:
                torch.cuda.set_per_process_memory_fraction(0.5)
            self.assertNotIn("gpumem", "".join(caught.exception.args).lower())
            self.assertEqual((records, notes), ([], {}))
        finally:
            i.stop()
        self.assertIs(torch.cuda.set_per_process_memory_fraction, torch.cuda.memory.set_per_process_memory_fraction)
        self.assertEqual(torch.cuda.set_per_process_memory_fraction.__module__, "torch.cuda.memory")


if __name__ == "__main__":
    unittest.main()
