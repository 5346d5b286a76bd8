"""The control socket's verbs, one method each, named and with the arguments and defaults that
protocol.py (generated from src/collect/protocol.ts, the one definition) gives them. handlers()
checks every request's arguments against that definition before a method runs, so the methods
never check types themselves; test/collect/protocol.test.ts holds the methods, their arguments and
the fields they answer to the definition.

Imports no torch: the agent hands in the one it was started with.
"""
import os
import re
import threading
import time

from . import tensor_names
from .protocol import VERBS

AT_STEP_WAIT = 3.0  # `names` with at_step: how long to wait for an optimizer step before answering now


class Commands:
    """The verbs every agent answers, on `agent` (an Agent: its torch, ring, phases, guard)."""

    def __init__(self, agent):
        self.agent = agent

    def _reserved(self):
        a = self.agent
        return [a.torch.cuda.memory_reserved(d) for d in range(a.n_devices)]

    def info(self):
        a = self.agent
        m = a.manifest()
        m["totals"] = [a.ring.totals(d) for d in range(a.n_devices)]
        m["step"] = a.phases.step
        m["failures"] = dict(a.guard.failures)  # exceptions caught per feature
        return m

    def names(self, scan=False, at_step=False):
        a = self.agent

        def names_off():
            return RuntimeError("names are off in this process: %s" % a.notes.get("names", "a walk failed"))

        if not a.guard.on("names"):
            raise names_off()
        t0 = time.perf_counter()
        try:
            if scan:
                walk = tensor_names.scan_walk(a.torch, a.phases.models, a.phases.optimizers)
            elif at_step:
                # Taken on the training thread right after the next optimizer step, where the
                # gradients and the optimizer state are alive (between zero_grad and backward a
                # gradient is None); now, where no step comes within AT_STEP_WAIT seconds.
                walk, ms = self._names_after_step()
            else:
                walk = tensor_names.known_walk(a.phases.models, a.phases.optimizers)
        except Exception as e:  # the walk itself failed (one odd tensor only skips that tensor)
            a.guard.fail("names", e)
            raise names_off()
        if not at_step or scan:
            ms = (time.perf_counter() - t0) * 1000
        # The records written after the walk (every lane together, as the monitor's reader
        # counts its position): every tensor named was allocated before it, so the monitor
        # applies the names once its reading has reached that point of the stream.
        return {"tensors": list(walk.out.values()), "skipped": walk.skipped, "scan_ms": round(ms, 3), "scan": scan,
                "write_index": a.ring.written(), "step": a.phases.step}

    def empty_cache(self):
        before = self._reserved()
        self.agent.torch.cuda.empty_cache()
        self.agent.sync()
        return {"reserved_before": before, "reserved_after": self._reserved()}

    def dump_snapshot(self, path=None, only_with_trace=False):
        # The monitor names the file (in the directory it was started in, or --dump-dir): the
        # agent's own directory is a small /dev/shm in a container. It asks only_with_trace: a
        # snapshot without memory history has no trace, and the monitor then writes the one file
        # from its own events instead (docs/protocol.md, "Control socket").
        a = self.agent
        if only_with_trace and not a.history_on:
            return {"path": None, "size": None, "history": False}
        path = a._dump("snapshot", path)
        return {"path": path, "size": os.path.getsize(path), "history": a.history_on}

    def history(self, enabled, stacks="python", max_entries=100000):
        # Python stacks by default: C++ stacks cost per allocation and seconds to symbolize at
        # dump time. A bounded trace: history forgotten on does not grow without end.
        memory = self.agent.torch.cuda.memory
        if enabled:
            memory._record_memory_history("all", stacks=stacks, max_entries=max_entries)
        else:
            memory._record_memory_history(None)
        self.agent.history_on = enabled
        return {"enabled": enabled, "stacks": stacks, "max_entries": max_entries} if enabled else {"enabled": False}

    def reset_peaks(self):
        a = self.agent
        for d in range(a.n_devices):
            a.torch.cuda.reset_peak_memory_stats(d)
            if a.mode == "hook":  # the hook keeps this peak itself: restart it from now
                a.ring.set_totals(d, peak_reserved=a.ring.totals(d)["reserved"])
        a.sync()
        return {}

    def lines(self):
        from . import profile_stats

        return {"functions": profile_stats()}

    def _names_after_step(self):
        """(Walk, ms) taken right after the next step; a failure of the walk is raised here, on
        the asking thread, never on the training thread that ran it."""
        a = self.agent
        done = threading.Event()
        out = {}

        def take():
            t0 = time.perf_counter()
            try:
                out["walk"] = tensor_names.known_walk(a.phases.models, a.phases.optimizers)
            except Exception as e:
                out["error"] = e
            finally:
                out["ms"] = (time.perf_counter() - t0) * 1000
                done.set()

        # With phases off, or after-step callables off, no step will run it: now.
        if a.phases.on and a.guard.on("after_step"):
            a.phases.after_step.append(take)
            if not done.wait(AT_STEP_WAIT):
                try:
                    a.phases.after_step.remove(take)
                except ValueError:  # the step came just now: its answer is on its way
                    done.wait()
                else:
                    take()
        else:
            take()
        if "error" in out:
            raise out["error"]
        return out["walk"], out["ms"]


class AttachedCommands(Commands):
    """An agent that `gpumem-tui attach` started also answers `detach`."""

    def detach(self):
        # Answered first: the socket goes with the rest, a moment after the reply is sent.
        threading.Thread(target=self.agent.detach, name="gpumem-agent-detach", daemon=True).start()
        return {"detaching": True}


def _type_ok(t, v):
    if t == "null":
        return v is None
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    return False


def _why_not(schema, v):
    """None where `v` fits the argument's schema, else what it should be, in words."""
    options = schema.get("anyOf")
    if options:
        whys = [_why_not(o, v) for o in options]
        return None if None in whys else " or ".join(whys)
    t = schema.get("type")
    if "description" in schema and (t is not None and not _type_ok(t, v) or "pattern" in schema and not re.search(schema["pattern"], v)):
        return schema["description"]  # the definition's words for what the argument is
    if t is not None and not _type_ok(t, v):
        return {"boolean": "true or false", "integer": "an integer", "string": "a string", "null": "null"}.get(t, t)
    if "enum" in schema and v not in schema["enum"]:
        return " or ".join(repr(x) for x in schema["enum"])
    if "pattern" in schema and not re.search(schema["pattern"], v):
        return "a string matching %s" % schema["pattern"]
    if "exclusiveMinimum" in schema and not v > schema["exclusiveMinimum"]:
        return "above %s" % schema["exclusiveMinimum"]
    if "minimum" in schema and not v >= schema["minimum"]:
        return "at least %s" % schema["minimum"]
    return None


def check_args(verb, args):
    """`args` of `verb` with defaults filled in; TypeError (the client's "bad arguments") if the
    protocol does not allow them."""
    spec = VERBS[verb]
    known = spec["args"]
    for k in args:
        if k not in known:
            raise TypeError('%s takes no argument "%s"%s' % (verb, k, "; known: " + ", ".join(known) if known else ""))
    for k in spec["required_args"]:
        if k not in args:
            raise TypeError('%s needs "%s"' % (verb, k))
    out = {}
    for k, schema in known.items():
        if k not in args:
            out[k] = schema.get("default")
            continue
        why = _why_not(schema, args[k])
        if why:
            raise TypeError('%s: "%s" must be %s' % (verb, k, why))
        out[k] = args[k]
    return out


def handlers(commands):
    """{verb: fn(**args)} for every verb of the protocol this agent answers, each checking its
    arguments first."""
    attached = isinstance(commands, AttachedCommands)

    def checked(verb, method):
        return lambda **args: method(**check_args(verb, args))

    return {verb: checked(verb, getattr(commands, verb)) for verb, spec in VERBS.items() if attached or not spec["attached_only"]}
