"""Building the allocator hook (cuda/hook.cpp) against the torch this process imported.

Compiled once per torch build and hook source, cached under ~/.cache/gpumem-tui; a file lock makes
eight ranks starting at once build it once while the others wait. A failed build is reported with
its command and the compiler's words, and the agent falls back to polling.
"""
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIRS = [os.path.join(HERE, "..", "..", "cuda"), os.path.join(HERE, "cuda")]


def source_dir():
    for d in SOURCE_DIRS:
        if os.path.exists(os.path.join(d, "hook.cpp")):
            return os.path.abspath(d)
    raise BuildError("the hook's source (cuda/hook.cpp) is not next to the agent")


class BuildError(Exception):
    pass


def cache_dir(env=os.environ):
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpumem-tui")


def _compiler(env=os.environ):
    for cxx in [env.get("GPUMEM_HOOK_CXX"), env.get("CXX"), "g++", "c++", "clang++"]:
        if cxx and (os.path.isabs(cxx) and os.access(cxx, os.X_OK) or shutil.which(cxx)):
            return cxx
    return None


def _include_dirs(torch):
    from torch.utils import cpp_extension

    try:
        dirs = list(cpp_extension.include_paths("cuda"))
    except TypeError:  # older signature
        dirs = list(cpp_extension.include_paths(cuda=True))
    # pip-installed CUDA headers, for a machine with no CUDA toolkit
    for site in sys.path:
        d = os.path.join(site, "nvidia", "cuda_runtime", "include")
        if os.path.isdir(d):
            dirs.append(d)
    return dirs


def build_command(torch, out, cxx):
    src = source_dir()
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I", src]
    for d in _include_dirs(torch):
        cmd += ["-I", d]
    cmd += [os.path.join(src, "hook.cpp"), "-o", out, "-L", torch_lib, "-Wl,-rpath," + torch_lib]
    cmd += ["-lc10", "-lc10_cuda", "-ltorch_cpu"]
    return cmd


def cache_key(torch, cxx):
    h = hashlib.sha256()
    src = source_dir()
    for f in ("hook.cpp", "gpumem_ring.h"):
        with open(os.path.join(src, f), "rb") as fh:
            h.update(fh.read())
    h.update(repr((torch.__version__, getattr(torch.version, "git_version", ""), getattr(torch.version, "cuda", ""), cxx)).encode())
    return h.hexdigest()[:16]


def hook_library(torch, env=os.environ, log=None):
    """Path of the built hook, building it if needed. Raises BuildError with the command and error."""
    cxx = _compiler(env)
    if not cxx:
        raise BuildError("no C++ compiler (g++, c++ or clang++) to build the hook; install one (e.g. `apt install g++`)")
    d = cache_dir(env)
    os.makedirs(d, exist_ok=True)
    key = cache_key(torch, cxx)
    out = os.path.join(d, "hook-%s.so" % key)
    if os.path.exists(out):
        return out
    with open(os.path.join(d, "hook-%s.lock" % key), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building it: wait
        if os.path.exists(out):
            return out
        tmp = "%s.%d.tmp" % (out, os.getpid())
        cmd = build_command(torch, tmp, cxx)
        if log:
            log("building the allocator hook: %s" % " ".join(shlex.quote(c) for c in cmd))
        compile_to(cmd, tmp, out, os.path.join(d, "hook-%s.log" % key))
    return out


def compile_to(cmd, tmp, out, log_path):
    """Run the compiler command `cmd` (which writes `tmp`) and publish `tmp` as `out`. On failure:
    the command and the compiler's whole output go to `log_path`, and BuildError says the command,
    the last lines, and where the log is."""
    line = " ".join(shlex.quote(c) for c in cmd)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        output, code = p.stdout, p.returncode
    except OSError as e:  # the compiler itself cannot be started
        output, code = str(e), -1
    if code == 0 and not os.path.exists(tmp):
        output, code = output + "\n(the compiler succeeded but wrote no %s)" % tmp, -1
    if code != 0:
        try:
            with open(log_path, "w") as f:
                f.write("$ %s\nexit status %d\n%s" % (line, code, output))
            where = "; full log: %s" % log_path
        except OSError:
            where = ""
        tail = "\n".join(output.strip().splitlines()[-15:])
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise BuildError("building the hook failed (%s)%s:\n%s" % (line, where, tail))
    os.replace(tmp, out)
    return out
