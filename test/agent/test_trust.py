"""What the agent trusts (issue 35, items 1 and 2, agent's side): the hook's build searches only
torch's, sysconfig's and torch's own site-packages' directories, checked, and hashes them into its
key; planted modules beside a program's script or in its working directory never run when the agent
is loaded (`run`'s sitecustomize, attach's bootstrap); `python -I`/`-E` keeps the agent from reading
GPUMEM_HOOK_CXX, CXX, XDG_CACHE_HOME; a setuid or setgid process is refused in one line.

Standard library only, run by `bun test` (test/agent/trust.test.ts). There is no torch here: a small
torch package on disk (a version, _C's ABI flag, an include and a lib directory; a CUDA toolkit's
include named by CUDA_HOME) stands in for the parts of it the build reads; the compiler, the interpreters and the uids
are real. Tests that need root (another uid, setresuid, a mount namespace) are skipped without it.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = os.path.realpath(os.path.join(HERE, "..", "..", "agent"))
INJECT = os.path.join(AGENT, "gpumem_agent", "_inject")
sys.path.insert(0, AGENT)

from gpumem_agent import build  # noqa: E402

OTHER = 4242
ROOT = os.geteuid() == 0
needs_root = unittest.skipUnless(ROOT, "needs root (another uid, setresuid, a mount namespace): run the tests as root")
# The system's python3 where there is one: few modules loaded before the program's code, so a
# planted one is looked for. (A pyenv python's .pth files load struct and tempfile at start.)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CXX = shutil.which("g++") or shutil.which("c++")
MADE = []

TORCH_INIT = """
import types
__version__ = "9.9.9+ondisk"
version = types.SimpleNamespace(git_version="ondisk", cuda="12.4")
_C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=1)


class cuda:
    is_initialized = staticmethod(lambda: False)
    _lazy_call = staticmethod(lambda fn: None)
    device_count = staticmethod(lambda: 0)
"""
# A header planted where the old build searched first: it wraps the real one and compiles a
# constructor in that leaves a mark when the library is loaded.
PLANTED_STDLIB_H = """
#include_next <stdlib.h>
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE *f = fopen("%s", "a");
  if (f) { fputs("planted header ran\\n", f); fclose(f); }
}
"""
PLANTED_MODULE = """
with open(%r, "a") as f:
    f.write(__name__ + " from " + __file__ + "\\n")
"""
PLANTED_NAMES = ("json", "struct", "secrets", "tempfile", "selectors", "socket", "pickle", "ctypes", "threading", "sysconfig")


def mkdtemp():
    d = tempfile.mkdtemp(prefix="gpumem-trust-")
    os.chmod(d, 0o755)  # readable by the other uid's processes
    MADE.append(d)
    return d


def tearDownModule():
    for d in MADE:
        shutil.rmtree(d, ignore_errors=True)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def make_torch(root):
    """A torch package on disk in root/site, a CUDA toolkit's include at root/cuda. Returns site."""
    site = os.path.join(root, "site")
    write(os.path.join(site, "torch", "__init__.py"), TORCH_INIT)
    # Were the build to import torch.utils.cpp_extension (setuptools), this one would say so.
    write(os.path.join(site, "torch", "utils", "__init__.py"), "")
    write(os.path.join(site, "torch", "utils", "cpp_extension.py"), "raise ImportError('the build imported cpp_extension')\n")
    for d in ("torch/include/torch/csrc/api/include", "torch/lib"):
        os.makedirs(os.path.join(site, d), exist_ok=True)
    os.makedirs(os.path.join(root, "cuda", "include"), exist_ok=True)
    return site


def load_torch(site):
    """The on-disk torch as this process's `torch` (as the program would have imported it)."""
    sys.path.insert(0, site)
    try:
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
        import torch

        return torch
    finally:
        sys.path.remove(site)


def plant(d, marker, names=PLANTED_NAMES):
    for name in names:
        write(os.path.join(d, name + ".py"), PLANTED_MODULE % marker)


def dirs_in(cmd):
    """Every directory the command names for the compiler's and the linker's searches."""
    out = [c[2:] if c.startswith(("-I", "-L")) and len(c) > 2 else None for c in cmd]
    for i, c in enumerate(cmd[:-1]):
        if c in ("-I", "-idirafter", "-isystem", "-iquote", "-L"):
            out[i + 1] = cmd[i + 1]
    out += [c.split("-rpath,", 1)[1] for c in cmd if "-rpath," in c]
    return [d for d in out if d]


class HookBuild(unittest.TestCase):
    def setUp(self):
        self.root = mkdtemp()
        self.site = make_torch(self.root)
        self.torch = load_torch(self.site)
        # Another user's directory on sys.path (a group's project folder; '' for the working
        # directory of `python -c`), with a stdlib.h where the old build looked for CUDA's headers.
        self.planted = mkdtemp()
        self.marker = os.path.join(self.root, "marker")
        write(os.path.join(self.planted, "nvidia", "cuda_runtime", "include", "stdlib.h"), PLANTED_STDLIB_H % self.marker)
        sys.path.insert(0, self.planted)
        # The CUDA toolkit, found as torch's cpp_extension finds it (build.cuda_home).
        self.cuda_home = os.environ.get("CUDA_HOME")
        os.environ["CUDA_HOME"] = os.path.join(self.root, "cuda")

    def tearDown(self):
        sys.path.remove(self.planted)
        if self.cuda_home is None:
            os.environ.pop("CUDA_HOME", None)
        else:
            os.environ["CUDA_HOME"] = self.cuda_home

    def test_the_build_imports_no_setuptools(self):
        # torch.utils.cpp_extension imports setuptools, which searches its own _vendor directory
        # (not the interpreter's: trust.only_trusted refuses it; the hook fell back to polling on an
        # H200 host) and costs 0.44 s a start: the include directories are found without it.
        self.command()
        build.cache_key(self.torch, CXX or "g++")
        self.assertNotIn("torch.utils.cpp_extension", sys.modules)
        self.assertNotIn("setuptools", sys.modules)

    def command(self, python=True):
        return build.build_command(self.torch, os.path.join(self.root, "hook.so"), CXX or "g++", python=python)

    def test_a_header_planted_on_sys_path_is_not_searched(self):
        cmd = self.command()
        self.assertFalse([d for d in dirs_in(cmd) if d.startswith(self.planted)], cmd)
        torch_dir = os.path.join(self.site, "torch")
        # torch's own first (its c10 over any other torch's), the CUDA toolkit's after the system's.
        self.assertIn(["-I", os.path.join(torch_dir, "include")], [cmd[i:i + 2] for i in range(len(cmd))])
        self.assertIn(["-idirafter", os.path.join(self.root, "cuda", "include")], [cmd[i:i + 2] for i in range(len(cmd))])

    @unittest.skipUnless(CXX, "no C++ compiler here")
    def test_the_planted_header_is_not_compiled_in(self):
        # The hook's command as the agent builds it, with cuda/pystack.c alone (hook.cpp needs a real
        # torch's headers) and without torch's libraries (none here): the planted header stays out.
        out = os.path.join(self.root, "pystack.so")
        cmd = [c for c in self.command() if not c.endswith("hook.cpp") and not c.startswith("-l")]
        cmd[cmd.index("-o") + 1] = out
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout)
        p = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", out], timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertFalse(os.path.exists(self.marker), "the planted stdlib.h was compiled into the hook and ran")

    def test_pip_cuda_headers_only_beside_torch_and_in_the_key(self):
        before = build.cache_key(self.torch, CXX or "g++")
        pip = os.path.join(self.site, "nvidia", "cuda_runtime", "include")
        os.makedirs(pip)
        self.assertIn(["-idirafter", pip], [self.command()[i:i + 2] for i in range(len(self.command()))])
        after = build.cache_key(self.torch, CXX or "g++")
        self.assertNotEqual(before, after, "the include directories are not in the hook's cache key")
        self.assertEqual(after, build.cache_key(self.torch, CXX or "g++"))

    def test_the_compiler_is_in_the_key(self):
        other = write(os.path.join(self.root, "bin", "g++"), "#!/bin/sh\nexec g++ \"$@\"\n", 0o755)
        self.assertNotEqual(build.cache_key(self.torch, "/usr/bin/g++"), build.cache_key(self.torch, other))

    def test_a_compiler_others_can_write_is_not_run(self):
        marker = os.path.join(self.root, "cc-ran")
        cc = write(os.path.join(self.root, "bin", "cc"), EVIL_CC % marker, 0o777)
        os.chmod(cc, 0o777)
        env = {"GPUMEM_HOOK_CXX": cc, "XDG_CACHE_HOME": os.path.join(self.root, "cache")}
        with self.assertRaisesRegex(build.BuildError, r"not building the hook with the compiler %s: %s is writable by other users \(mode 777\)" % (cc, cc)):
            build.hook_library(self.torch, env)
        self.assertFalse(os.path.exists(marker))

    def test_an_include_directory_others_can_write_is_refused(self):
        inc = os.path.join(self.site, "torch", "include")
        os.chmod(inc, 0o777)
        with self.assertRaisesRegex(build.BuildError, r"not building the hook against torch's include directory %s: %s is writable by other users \(mode 777\)" % (inc, inc)):
            self.command()

    def test_a_parent_others_can_write_is_refused(self):
        # Whoever can write the parent can put another directory in the checked one's place.
        os.chmod(self.site, 0o777)
        with self.assertRaisesRegex(build.BuildError, r"%s is writable by other users \(mode 777\)" % self.site):
            self.command()
        os.chmod(self.site, 0o1777)  # sticky: no one else can move what is ours in it
        self.command()

    def test_torch_libraries_others_can_write_are_refused(self):
        lib = os.path.join(self.site, "torch", "lib")
        os.chmod(lib, 0o775)
        with self.assertRaisesRegex(build.BuildError, "torch's libraries %s" % lib):
            self.command()

    @needs_root
    def test_a_directory_of_another_user_is_refused(self):
        cuda = os.path.join(self.root, "cuda", "include")
        os.chown(cuda, OTHER, OTHER)
        with self.assertRaisesRegex(build.BuildError, "belongs to uid %d, neither to us" % OTHER):
            self.command()


EVIL_CC = """#!/bin/sh
echo "$0 ran as $(id -u)" >> %s
exit 1
"""

# Run under `python -I` or `-E`: what the agent reads of its environment and the compiler it runs.
ISOLATED_CHILD = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import torch
from gpumem_agent import build, agent
agent._log("GPUMEM_TUI_VERBOSE was read")
out = {"compiler": build._compiler(), "cache": build.cache_dir()}
try:
    build.hook_library(torch)
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


@needs_root
class Isolated(unittest.TestCase):
    """`python -I` and `-E`: GPUMEM_HOOK_CXX, CXX, PATH and XDG_CACHE_HOME are not the agent's to read."""

    def run_isolated(self, flag):
        root = mkdtemp()
        site = make_torch(root)
        marker = os.path.join(root, "evil-ran")
        evil = write(os.path.join(root, "bin", "evilcc"), EVIL_CC % marker, 0o755)
        shutil.copy(evil, os.path.join(root, "bin", "g++"))
        child = write(os.path.join(root, "child.py"), ISOLATED_CHILD)
        env = dict(os.environ, GPUMEM_HOOK_CXX=evil, CXX=evil, PATH=os.path.join(root, "bin") + ":" + os.environ.get("PATH", ""),
                   XDG_CACHE_HOME=os.path.join(root, "cache"), GPUMEM_TUI_VERBOSE="1")
        # The cache is the home's (the password database's) under -I: a private /root for this run.
        p = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs "$HOME_DIR" && exec "$@"', "sh", PY, flag, child, site, AGENT],
                           env=dict(env, HOME_DIR=os.path.expanduser("~root")), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertFalse(os.path.exists(marker), "the compiler named in the environment ran: %s" % open(marker).read() if os.path.exists(marker) else "")
        self.assertFalse(out["compiler"].startswith(root), out)
        self.assertEqual(os.path.realpath(os.path.dirname(out["compiler"])), "/usr/bin")
        self.assertEqual(out["cache"], os.path.join(os.path.expanduser("~root"), ".cache", "gpumem-tui"))
        self.assertNotIn("GPUMEM_TUI_VERBOSE was read", p.stderr)
        self.assertNotIn(root + "/bin", out.get("error", ""))
        return out

    def test_python_I(self):
        self.run_isolated("-I")

    def test_python_E(self):
        self.run_isolated("-E")


SETUID_CHILD = """
import os, sys
getattr(os, sys.argv[2])(5000, 0, 0)  # real id 5000, effective and saved root: a setuid program's ids
sys.path.insert(0, sys.argv[1])
import gpumem_agent
print(gpumem_agent.attach(), gpumem_agent.attach())
"""

# The attach path: trust.py's and the bootstrap's text as the monitor sends them, then the thread's
# work (_start) as root with real id 5000.
SETUID_BOOT = """
import os, sys
agent, which, token = sys.argv[1], sys.argv[2], sys.argv[3]
trust = os.path.join(agent, "gpumem_agent", "trust.py")
text = (open(trust).read() if os.path.exists(trust) else "") + "\\n" + open(os.path.join(agent, "gpumem_agent", "_inject", "bootstrap.py")).read()
ns = {"__name__": "__gpumem_bootstrap__"}
exec(compile(text, "<gpumem-bootstrap>", "exec"), ns)
getattr(os, which)(5000, 0, 0)
ns["_start"](token, agent, "gpumem_agent", None, None)
print("gpumem_agent" in sys.modules)
"""


@needs_root
class SetId(unittest.TestCase):
    def test_attach_in_a_setuid_or_setgid_process_refuses_in_one_line(self):
        for which, what in (("setresuid", "uid 5000 gid 0 with effective uid 0 gid 0"), ("setresgid", "uid 0 gid 5000 with effective uid 0 gid 0")):
            p = subprocess.run([PY, "-c", SETUID_CHILD, AGENT, which], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, "None None\n")
            self.assertEqual(p.stderr, "gpumem-agent: not attached: this process runs as %s (a setuid or setgid program): "
                             "the agent does not start where it would act with another user's rights\n" % what)

    def test_the_bootstrap_refuses_before_importing_the_agent(self):
        d = mkdtemp()
        token = os.path.join(d, "token")
        p = subprocess.run([PY, "-c", SETUID_BOOT, AGENT, "setresuid", token], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "False\n")  # nothing of the agent was imported
        with open(token + ".error") as f:
            self.assertEqual(f.read(), "this process runs as uid 5000 gid 0 with effective uid 0 gid 0 (a setuid or setgid program): "
                             "the agent does not start where it would act with another user's rights\n")


TARGET = """
import sys
import torch
print("done", sys.argv[1:])
"""


class PlantedModules(unittest.TestCase):
    """`run`: the agent attaches as the program imports torch, from sitecustomize on PYTHONPATH; by
    then sys.path starts with the script's directory (or '' for the working directory)."""

    def setUp(self):
        self.root = mkdtemp()
        self.site = make_torch(self.root)
        self.marker = os.path.join(self.root, "planted-ran")
        self.script_dir, self.cwd = mkdtemp(), mkdtemp()
        plant(self.script_dir, self.marker)
        plant(self.cwd, self.marker)
        self.script = write(os.path.join(self.script_dir, "train.py"), TARGET)
        agents = os.path.join(self.root, "agents")
        # The hook's build is off (GPUMEM_TUI_POLLING): no torch to build against; what is tested
        # is what the agent imports.
        self.env = dict(os.environ, PYTHONPATH=":".join([INJECT, AGENT, self.site]), GPUMEM_TUI_DIR=agents,
                        GPUMEM_TUI_POLLING="1", GPUMEM_TUI_VERBOSE="1", XDG_CACHE_HOME=os.path.join(self.root, "cache"))

    def run_program(self, *argv):
        p = subprocess.run([PY, *argv], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def assert_none_ran(self):
        ran = open(self.marker).read() if os.path.exists(self.marker) else ""
        self.assertEqual(ran, "", "planted modules ran in the program")

    def test_beside_the_script(self):
        p = self.run_program(self.script, "x")
        self.assertEqual(p.stdout, "done ['x']\n")
        self.assert_none_ran()

    def test_in_the_working_directory_of_python_c(self):
        p = self.run_program("-c", TARGET)
        self.assertEqual(p.stdout, "done []\n")
        self.assert_none_ran()

    def test_the_agent_is_attached_and_the_program_still_imports_as_it_would(self):
        # The program's own imports follow its sys.path (its choice, not ours): a module of the
        # standard library the agent does not use, planted in the working directory, is found.
        plant(self.cwd, self.marker, ["colorsys"])
        p = self.run_program("-c", "import torch, colorsys, gpumem_agent; print(gpumem_agent.current() is not None)")
        self.assertEqual(p.stdout, "True\n")
        self.assertEqual(open(self.marker).read(), "colorsys from %s\n" % os.path.join(self.cwd, "colorsys.py"))


if __name__ == "__main__":
    unittest.main()
