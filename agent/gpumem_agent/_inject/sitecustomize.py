"""Put first on PYTHONPATH by `gpumem-tui run`: attaches gpumem_agent as soon as the program
imports torch, with no change to its code, then hands over to any sitecustomize of its own."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain():
    # Another sitecustomize further down the path (a virtualenv's, a distro's) still runs.
    others = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec and spec.loader and os.path.abspath(os.path.dirname(spec.origin or "")) != _here:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


class _AttachAfterTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_attach(module):
            exec_module(module)
            try:
                import gpumem_agent

                gpumem_agent.attach()
            except Exception as e:  # the program must run even if the agent cannot
                if os.environ.get("GPUMEM_TUI_VERBOSE") == "1":
                    sys.stderr.write("gpumem-agent: not attached: %s\n" % e)

        loader.exec_module = exec_and_attach
        return spec


if os.environ.get("GPUMEM_TUI_DISABLE") != "1":
    if "torch" in sys.modules:
        import gpumem_agent

        gpumem_agent.attach()
    else:
        sys.meta_path.insert(0, _AttachAfterTorch())
_chain()
