"""Put first on PYTHONPATH by `gpumem-tui run`: attaches gpumem_agent as soon as the program
imports torch, with no change to its code, then hands over to any sitecustomize of its own.

The agent is loaded from its own directory by location, its imports from the interpreter's own
directories only (gpumem_agent/trust.py): by the time torch is imported, sys.path starts with the
program's script directory or the working directory, where anyone who can write there could have
put a json.py. (This file's own imports run before the interpreter adds either.)"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(os.path.dirname(_here))  # the directory that holds gpumem_agent


def _load_trust():
    # By its file, under a private name: the package itself is loaded only once it is checked.
    spec = importlib.util.spec_from_file_location("_gpumem_agent_trust", os.path.join(_root, "gpumem_agent", "trust.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_trust = _load_trust()
_env = _trust.environ()


def _attach():
    """Load the agent from _root and attach it, its imports from trusted directories only. Never
    raises: a refusal (a setuid program, an agent's directory others can write) is one line on
    stderr; any other failure only where GPUMEM_TUI_VERBOSE=1."""
    try:
        agent = _trust.load_agent(_root)
        with _trust.only_trusted(_root):
            agent.attach()
    except _trust.Refused as e:
        sys.stderr.write("gpumem-agent: not attached: %s\n" % e)
    except Exception as e:  # the program must run even if the agent cannot
        if _env.get("GPUMEM_TUI_VERBOSE") == "1":
            sys.stderr.write("gpumem-agent: not attached: %s\n" % e)


def _chain():
    # Another sitecustomize further down the path (a virtualenv's, a distro's) still runs.
    others = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec and spec.loader and os.path.abspath(os.path.dirname(spec.origin or "")) != _here:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


class _AttachAfterTorch(importlib.abc.MetaPathFinder):
    """Wraps torch's loader so the agent attaches right after torch executes. It stays on the path
    until then: a probe such as importlib.util.find_spec("torch") (transformers' is_torch_available,
    a program checking its dependencies) asks for a spec without importing, and must not disarm it."""

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        spec = None
        for finder in sys.meta_path:  # the finders after us, as the import system would ask them
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        finder = self

        def exec_and_attach(module):
            loader.exec_module = exec_module  # once: a reload runs torch's own loader
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            exec_module(module)
            _attach()

        loader.exec_module = exec_and_attach
        return spec


if _env.get("GPUMEM_TUI_DISABLE") != "1":
    if "torch" in sys.modules:
        _attach()
    else:
        sys.meta_path.insert(0, _AttachAfterTorch())
_chain()
