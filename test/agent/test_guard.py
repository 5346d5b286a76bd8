"""The agent never raises into the program: its guard, the phase hooks, the wrapped backward, the
names walk, the control thread and the agent's names verb, each made to fail. Standard library
only (the torch-free parts, as the program's hooks call them), run by `bun test`
(test/agent/guard.test.ts). The same with real torch and real tensors: test/agent/names_zoo.py."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import types
import unittest
import warnings

AGENT = os.path.join(os.path.dirname(__file__), "..", "..", "agent")
sys.path.insert(0, AGENT)

from gpumem_agent import ring, tensor_names  # noqa: E402
from gpumem_agent.control import ControlServer, handle_line  # noqa: E402
from gpumem_agent.guard import Guard, sentence  # noqa: E402
from gpumem_agent.phases import BACKWARD, FORWARD, OPTIMIZER, OTHER, Phases  # noqa: E402
from gpumem_agent.wire import ACTION  # noqa: E402

INVALID = "Attempted to access the data pointer on an invalid python storage"


class Marks:
    """The ring's side of the phase hooks: records each mark; raises from the `fail_at`-th on."""

    def __init__(self, fail_at=None):
        self.calls = []
        self.fail_at = fail_at

    def __call__(self, action, phase, step):
        self.calls.append((action, phase, step))
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise OSError(5, "the ring is gone")


class Obj:
    """A module or an optimizer, as far as the hooks look (they keep weak references)."""


class Handle:
    def __init__(self):
        self.removed = False

    def remove(self):
        self.removed = True


class GuardRule(unittest.TestCase):
    def test_a_failure_is_counted_said_once_and_turns_its_feature_off(self):
        notes, stopped, changed = {}, [], []
        g = Guard(notes, step=lambda: 7, changed=lambda: changed.append(dict(notes)))
        g.stops("names", lambda: stopped.append(1))
        self.assertTrue(g.on("names"))
        g.fail("names", RuntimeError(INVALID + "\nsecond line"))
        g.fail("names", ValueError("later"))
        self.assertEqual(notes, {"names": "off: RuntimeError: %s (at step 7)" % INVALID})
        self.assertEqual(g.failures, {"names": 2})
        self.assertEqual(stopped, [1])
        self.assertEqual(changed, [{"names": "off: RuntimeError: %s (at step 7)" % INVALID}])  # the manifest rewritten once
        self.assertFalse(g.on("names"))
        self.assertTrue(g.on("phases"))

    def test_fail_never_raises(self):
        class Unprintable(Exception):
            def __str__(self):
                raise KeyError("no")

        def boom():
            raise OSError("stop failed")

        g = Guard({}, step=lambda: 1 / 0, changed=boom)
        g.stops("oom", boom)
        g.fail("oom", Unprintable())
        self.assertEqual(g.notes["oom"], "off: Unprintable")
        self.assertEqual(sentence(ValueError("x" * 1000))[:20], "off: ValueError: xxx")
        self.assertLess(len(sentence(ValueError("x" * 1000))), 330)

    def test_call_returns_the_value_or_none_and_skips_a_feature_that_is_off(self):
        g = Guard({})
        self.assertEqual(g.call("sync", lambda a: a + 1, 1), 2)
        self.assertIsNone(g.call("sync", lambda: [][1]))
        ran = []
        self.assertIsNone(g.call("sync", lambda: ran.append(1)))
        self.assertEqual(ran, [])
        self.assertTrue(g.notes["sync"].startswith("off: IndexError: list index out of range"))

    def test_silent_unless_verbose(self):
        code = "import sys; sys.path.insert(0, %r)\nfrom gpumem_agent.guard import Guard\ntry:\n    raise RuntimeError('x')\nexcept Exception as e:\n    Guard({}).fail('names', e)\nprint('went on')" % AGENT
        quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "GPUMEM_TUI_VERBOSE": ""})
        self.assertEqual((quiet.returncode, quiet.stdout, quiet.stderr), (0, "went on\n", ""))
        loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "GPUMEM_TUI_VERBOSE": "1"})
        self.assertEqual(loud.stdout, "went on\n")
        self.assertIn("gpumem-agent: names off: RuntimeError: x", loud.stderr)
        self.assertIn("Traceback", loud.stderr)


class PhaseHooks(unittest.TestCase):
    def test_a_failing_mark_turns_phases_off_and_the_hooks_return_quietly(self):
        marks = Marks(fail_at=3)
        p = Phases(marks)
        module_hooks, opt_hooks = [Handle(), Handle()], [Handle(), Handle()]
        p.handles, p.global_hooks, p.opt_handles = list(module_hooks), list(module_hooks), list(opt_hooks)
        mod, opt = Obj(), Obj()
        p.pre(mod, ())  # mark 1: forward
        p.post(mod, (), None)  # mark 2: other
        p.opt_pre(opt, (), {})  # mark 3 raises: phases off
        self.assertFalse(p.on)
        self.assertEqual(p.guard.notes["phases"], "off: OSError: [Errno 5] the ring is gone (at step 0)")
        # Module hooks removed (torch copies them before a call); optimizer hooks stay registered
        # (torch walks their dict lazily while calling them) and do nothing.
        self.assertEqual([h.removed for h in module_hooks], [True, True])
        self.assertEqual([h.removed for h in opt_hooks], [False, False])
        n = len(marks.calls)
        p.opt_post(opt, (), {})
        p.pre(mod, ())
        p.post(mod, (), None)
        self.assertIsNone(p.enter_backward())
        self.assertEqual(len(marks.calls), n)  # no more marks
        self.assertEqual(p.guard.failures, {"phases": 1})

    def test_after_step_callables_run_each_guarded_with_phases_on_or_off(self):
        p = Phases(Marks())
        ran = []
        p.after_step += [lambda: ran.append("a"), lambda: [][0], lambda: ran.append("c")]
        p.opt_post(object(), (), {})  # never raises
        self.assertEqual(ran, ["a"])  # after a failure, after_step callables are off
        self.assertIn("IndexError", p.guard.notes["after_step"])
        self.assertEqual(p.step, 1)
        self.assertTrue(p.on)  # phases themselves go on

    def test_the_wrapped_backward_passes_torchs_result_and_exceptions_untouched(self):
        autograd = types.SimpleNamespace()
        mine = ValueError("torch's own error")

        def backward(x, fail=False):
            """torch's"""
            if fail:
                raise mine
            return x * 2

        def grad(x):
            return -x

        autograd.backward, autograd.grad = backward, grad
        marks = Marks()
        p = Phases(marks)
        p.wrap_autograd(autograd)
        self.assertEqual(autograd.backward.__doc__, "torch's")
        self.assertEqual(autograd.backward(21), 42)
        self.assertEqual([m[1] for m in marks.calls], [BACKWARD, OTHER])
        with self.assertRaises(ValueError) as e:
            autograd.backward(1, fail=True)
        self.assertIs(e.exception, mine)
        # Marks failing around torch's backward: torch's result, then torch's error, untouched.
        marks.fail_at = 1
        self.assertEqual(autograd.grad(3), -3)
        self.assertFalse(p.on)
        self.assertIs(autograd.backward, backward)  # given back at the failure
        self.assertIs(autograd.grad, grad)

    def test_phases_off_while_backward_runs_gives_torchs_error_untouched(self):
        autograd = types.SimpleNamespace(backward=None, grad=lambda: None)
        mine = RuntimeError("element 0 of tensors does not require grad")
        marks = Marks()
        p = Phases(marks)

        def backward():
            marks.fail_at = 1  # the mark after backward fails: the program still gets torch's error
            raise mine

        autograd.backward = backward
        p.wrap_autograd(autograd)
        wrapped = autograd.backward
        with self.assertRaises(RuntimeError) as e:
            wrapped()
        self.assertIs(e.exception, mine)
        self.assertIn("phases", p.guard.notes)

    def test_a_wrapper_put_over_ours_stays(self):
        autograd = types.SimpleNamespace(backward=lambda: 1, grad=lambda: 2)
        p = Phases(Marks())
        p.wrap_autograd(autograd)
        theirs = autograd.backward
        autograd.backward = lambda: theirs()
        outer = autograd.backward
        p.stop()
        self.assertIs(autograd.backward, outer)
        self.assertEqual(autograd.backward(), 1)


class CompileWarning(unittest.TestCase):
    """torch.compile's OptimizedModule warns at each call site while any global module hook is on
    (torch/_dynamo/eval_frame.py): the agent's own, on until the first optimizer step, must not put
    that warning into the program's output; the program's own global hooks still get it."""

    TORCH = "Using `torch.compile(module)` when there are global hooks on modules (e.g., from `register_module_forward_hook`); this will cause the hooks to fire an extra time"

    def setUp(self):
        sys.path.insert(0, os.path.dirname(__file__))
        import torch_double

        self.double = torch_double
        self.torch = torch_double.install()
        self.addCleanup(lambda: [sys.modules.pop(m) for m in list(sys.modules) if m == "torch" or m.startswith("torch.")])
        self.filters = list(warnings.filters)
        self.addCleanup(lambda: warnings.filters.__setitem__(slice(None), self.filters))

    def shown(self, message=None):
        """What the program's output gets for one warning at a fresh call site."""
        with warnings.catch_warnings(record=True) as got:  # keeps the filters as they are
            warnings.warn_explicit(message or self.TORCH, UserWarning, "train.py", 86, registry={})
        return len(got)

    def test_filtered_while_the_agents_global_hooks_are_on_and_not_after(self):
        p = Phases(Marks())
        p.install(self.torch)
        self.addCleanup(p.uninstall)
        self.assertEqual((self.shown(), self.shown("a warning of the program's own")), (0, 1))
        model = self.double.Module()
        p.pre(model, ())
        p.post(model, (), None)
        p.opt_post(Obj(), (), {})  # the first step: hooks narrowed to the model, the filter gone
        self.assertEqual(p.global_hooks, [])
        self.assertNotIn(p.warning_filter, warnings.filters)
        self.assertEqual(warnings.filters, self.filters)
        self.assertEqual(self.shown(), 1)

    def test_the_programs_own_global_hooks_keep_their_warning(self):
        theirs = self.torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: None)
        self.addCleanup(theirs.remove)
        p = Phases(Marks())
        p.install(self.torch)
        self.addCleanup(p.uninstall)
        self.assertEqual(self.shown(), 1)
        self.assertEqual(warnings.filters, self.filters)

    def test_phases_turned_off_drop_the_filter(self):
        p = Phases(Marks())
        p.install(self.torch)
        self.addCleanup(p.uninstall)
        self.assertEqual(self.shown(), 0)
        p.stop()
        self.assertEqual((self.shown(), warnings.filters), (1, self.filters))


class Tensorish:
    """What the names walk meets in training, as far as it looks: a CUDA tensor whose storage's
    pointer cannot be read (an FSDP parameter), or a working one."""

    is_cuda = True
    layout = "torch.strided"
    shape = (4,)
    dtype = "torch.float32"
    device = types.SimpleNamespace(index=0)

    def __init__(self, address, nbytes=16, error=None):
        self.address, self.nbytes, self.error = address, nbytes, error

    def untyped_storage(self):
        t = self

        class Storage:
            def nbytes(self):
                return t.nbytes

            def data_ptr(self):
                if t.error:
                    raise t.error
                return t.address

        return Storage()


class Model:
    def __init__(self, params, fail=None):
        self.params, self.fail = params, fail

    def named_parameters(self):
        if self.fail:
            raise self.fail
        return list(self.params.items())

    def named_buffers(self):
        return []


class Names(unittest.TestCase):
    def test_one_failing_tensor_is_skipped_and_counted_the_others_named(self):
        good = Tensorish(0x1000)
        w = tensor_names.known_walk([Model({"a": good, "b": Tensorish(0, error=RuntimeError(INVALID)), "c": Tensorish(0x2000, nbytes=0)})], [])
        self.assertEqual([e["name"] for e in w.out.values()], ["a"])
        self.assertEqual(w.skipped, 0)  # an unreadable pointer and a storage resized to zero are no blocks

        class Odd(Tensorish):
            @property
            def shape(self):
                raise TypeError("no shape")

        w = tensor_names.known_walk([Model({"a": good, "odd": Odd(0x3000)})], [])
        self.assertEqual(([e["name"] for e in w.out.values()], w.skipped), (["a"], 1))


class AgentVerbs(unittest.TestCase):
    """The agent's names verb and manifest, on a real ring and manifest file (no CUDA here)."""

    def setUp(self):
        os.environ["GPUMEM_TUI_POLLING"] = "1"
        from gpumem_agent.agent import Agent

        self.dir = tempfile.mkdtemp()
        a = self.agent = Agent(types.SimpleNamespace(__version__="none"), self.dir)
        a._builder.join()
        a.n_devices = 0
        a.ring_path, a.sock_path, a.manifest_path = (os.path.join(self.dir, "1" + x) for x in (".ring", ".sock", ".json"))
        a.ring = ring.Ring(a.ring_path, capacity=1024, n_devices=1)
        a.phases = Phases(a._mark, a.guard)
        self.handlers = a.handlers()

    def tearDown(self):
        self.agent.ring.close()

    def ask(self, **req):
        return handle_line(json.dumps(req).encode(), self.handlers)

    def test_a_failing_tensor_is_skipped_a_failing_walk_turns_names_off(self):
        model = Model({"w": Tensorish(0x1000), "bad": Tensorish(0x2000, error=RuntimeError(INVALID))})
        self.agent.phases.models.add(model)
        r = self.ask(cmd="names")
        self.assertTrue(r["ok"])
        self.assertEqual(([t["name"] for t in r["tensors"]], r["skipped"]), (["w"], 0))
        model.fail = RuntimeError("model changed size during iteration")
        r = self.ask(cmd="names")
        self.assertFalse(r["ok"])
        self.assertEqual(r["error"], "RuntimeError: names are off in this process: off: RuntimeError: model changed size during iteration (at step 0)")
        with open(self.agent.manifest_path) as f:
            self.assertEqual(json.load(f)["notes"], {"names": "off: RuntimeError: model changed size during iteration (at step 0)"})
        model.fail = None
        self.assertIn("names are off in this process", self.ask(cmd="names")["error"])
        self.assertIn("names are off in this process", self.ask(cmd="names", scan=True)["error"])
        self.assertEqual(self.agent.guard.failures, {"names": 1})

    def test_names_at_step_with_a_walk_failing_on_the_training_thread(self):
        model = Model({}, fail=RuntimeError("boom"))  # held here: the agent keeps models weakly
        self.agent.phases.models.add(model)
        got = {}
        asker = threading.Thread(target=lambda: got.update(r=self.ask(cmd="names", at_step=True)))
        asker.start()
        for _ in range(500):
            if self.agent.phases.after_step:
                break
            threading.Event().wait(0.01)
        self.agent.phases.opt_post(object(), (), {})  # the training thread's step: never raises
        asker.join(5)
        self.assertFalse(asker.is_alive())
        self.assertIn("names are off in this process: off: RuntimeError: boom (at step 1)", got["r"].get("error"))


class ControlThread(unittest.TestCase):
    def test_the_thread_survives_a_reply_json_cannot_carry_and_reports_what_ends_it(self):
        path = os.path.join(tempfile.mkdtemp(), "c.sock")
        errors = []
        srv = ControlServer(path, {"odd": lambda: {"x": object()}, "echo": lambda **k: k}, on_error=errors.append).start()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(path)
        s.sendall(b'{"id": 1, "cmd": "odd"}\n{"id": 2, "cmd": "echo", "a": 1}\n')
        buf = b""
        while buf.count(b"\n") < 2:
            buf += s.recv(65536)
        first, second = (json.loads(x) for x in buf.splitlines())
        self.assertEqual((first["id"], first["ok"]), (1, False))
        self.assertIn("could not be written as JSON", first["error"])
        self.assertEqual(second, {"id": 2, "ok": True, "a": 1})

        class Broken:
            def select(self, timeout=None):
                raise ValueError("selector broke")

        real, srv.sel = srv.sel, Broken()
        srv.thread.join(5)
        srv.sel = real
        self.assertFalse(srv.thread.is_alive())
        self.assertEqual([str(e) for e in errors], ["selector broke"])
        s.close()
        srv.stop()


if __name__ == "__main__":
    unittest.main()
