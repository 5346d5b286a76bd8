"""The library marks (libraries.py) on the torch and torch.distributed doubles: a mark per event,
never per call (init_process_group, new_group, each group's first collective, destroy), the
program's arguments, results and exceptions untouched, nothing marked inside a torch.compile trace,
and a failing mark turns the feature off in one note while the program's call still runs. Standard
library only; run by test/agent/libraries.test.ts."""
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))
import torch_double  # noqa: E402
import dist_double  # noqa: E402

torch = torch_double.install()
dist = dist_double.install(torch)

from gpumem_agent import libraries  # noqa: E402
from gpumem_agent.guard import Guard  # noqa: E402


class Ranges:
    """What the hook would get: each range entered and left, in order."""

    def __init__(self, fail=False):
        self.log = []
        self.fail = fail

    def __call__(self, name):
        ranges = self

        class R:
            def __enter__(self):
                if ranges.fail:
                    raise OSError(5, "the ring is gone")
                ranges.log.append(("enter", name))

            def __exit__(self, *a):
                ranges.log.append(("exit", name))

        return R()


def installed(fail=False, compiling=False):
    notes = {}
    libs = libraries.Libraries(torch, Guard(notes))
    libs.record_function = Ranges(fail)
    if compiling:
        libs.compiling = lambda: True
    return libs.install(), notes


class Libraries(unittest.TestCase):
    def tearDown(self):
        # The originals back (stop), so each test wraps the double afresh.
        self.libs.stop()
        dist_double.calls.clear()

    def entered(self):
        return [name for kind, name in self.libs.record_function.log if kind == "enter"]

    def test_one_mark_per_event_and_per_group_first_collective(self):
        self.libs, notes = installed()
        dist.init_process_group("nccl")
        t = dist.all_reduce("t")
        dist.all_reduce("t")
        dist.distributed_c10d.all_reduce("t")  # the same group under torch's other name
        g = dist.new_group([0])
        dist.all_reduce("t", None, g)  # the group by its place
        dist.barrier(group=g)
        dist.broadcast("t", 0)
        dist.destroy_process_group()
        dist.init_process_group("nccl", device_id=0)
        dist.all_reduce("t")  # a new default group after the destroy
        self.assertEqual(t, "t")
        self.assertEqual(self.entered(), [
            "gpumem:nccl:init_process_group",
            "gpumem:nccl:first_collective:all_reduce",
            "gpumem:nccl:new_group",
            "gpumem:nccl:first_collective:all_reduce",
            "gpumem:nccl:destroy_process_group",
            "gpumem:nccl:init_process_group:eager",
            "gpumem:nccl:first_collective:all_reduce",
        ])
        # Every range left, in order, and every call made with the program's arguments.
        self.assertEqual(len(self.libs.record_function.log), 14)
        self.assertEqual([c[0] for c in dist_double.calls].count("all_reduce"), 5)
        self.assertEqual(notes, {})

    def test_the_programs_exception_passes_unchanged_and_the_range_is_left(self):
        self.libs, notes = installed()
        with self.assertRaisesRegex(RuntimeError, "unhandled system error"):
            dist.all_reduce("fail")
        self.assertEqual(self.libs.record_function.log, [("enter", "gpumem:nccl:first_collective:all_reduce"), ("exit", "gpumem:nccl:first_collective:all_reduce")])
        self.assertEqual(notes, {})

    def test_nothing_is_marked_inside_a_compiled_region(self):
        self.libs, notes = installed(compiling=True)
        dist.init_process_group("nccl")
        dist.all_reduce("t")
        self.assertEqual(self.libs.record_function.log, [])
        self.assertEqual([c[0] for c in dist_double.calls], ["init_process_group", "all_reduce"])

    def test_a_failing_mark_turns_the_feature_off_once_and_the_call_still_runs(self):
        self.libs, notes = installed(fail=True)
        dist.init_process_group("nccl")
        self.assertEqual(dist.all_reduce("t"), "t")
        self.assertEqual([c[0] for c in dist_double.calls], ["init_process_group", "all_reduce"])
        self.assertEqual(notes, {"libraries": "off: OSError: [Errno 5] the ring is gone"})
        self.assertFalse(self.libs.on)
        # Off: the originals are back.
        self.assertIs(dist.all_reduce, dist_double.all_reduce)
        self.assertIs(dist.distributed_c10d.init_process_group, dist_double.init_process_group)

    def test_a_compile_is_marked_from_dynamos_callbacks_registered_at_torch_compiles_first_call(self):
        handler = CallbackHandler()

        def compile(model=None, **kwargs):  # torch.compile imports dynamo at its first call
            sys.modules["torch._dynamo.callback"] = types.SimpleNamespace(callback_handler=handler)
            return model

        torch.compile = compile
        try:
            self.libs, notes = installed()
            self.assertIsNot(torch.compile, compile)
            self.assertEqual(torch.compile("m", mode="reduce-overhead"), "m")  # the program's result
            handler.compile()  # dynamo compiling the first call
            handler.compile()
            self.assertEqual(self.entered(), ["gpumem:triton:compile", "gpumem:triton:compile"])
            self.assertEqual(self.libs.record_function.log[-1], ("exit", "gpumem:triton:compile"))
            self.libs.stop()  # off: torch.compile back, the callbacks removed
            self.assertIs(torch.compile, compile)
            self.assertEqual(handler.start, [])
        finally:
            del torch.compile
            sys.modules.pop("torch._dynamo.callback", None)


class CallbackHandler:
    """torch._dynamo.callback.callback_handler's registry, called as dynamo calls it around a compile."""

    def __init__(self):
        self.start, self.end = [], []

    def register_start_callback(self, fn):
        self.start.append(fn)

    def register_end_callback(self, fn):
        self.end.append(fn)

    def remove_start_callback(self, fn):
        self.start.remove(fn)

    def remove_end_callback(self, fn):
        self.end.remove(fn)

    def compile(self):
        for fn in self.start:
            fn(object())
        for fn in self.end:
            fn(object())


if __name__ == "__main__":
    unittest.main()
