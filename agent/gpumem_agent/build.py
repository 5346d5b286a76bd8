"""Building the allocator hook (cuda/hook.cpp) against the torch this process imported.

Compiled once per torch build and hook source, cached under ~/.cache/gpumem-tui; a file lock makes
eight ranks starting at once build it once while the others wait. A failed build is reported with
its command and the compiler's words, and the agent falls back to polling.

The library runs inside the training, so only the user may have written it: the cache is 0700 (an
existing one must be ours and closed to writers other than us), the compiler runs under umask 077,
and the library is checked again as it is loaded (load_checked).
"""
import fcntl
import hashlib
import os
import shlex
import shutil
import stat
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


def _writable_by_others(st, uid):
    """Why a file or directory of stat `st` could hold code other than ours, or None."""
    if st.st_uid != uid:
        return "belongs to uid %d, not to us (%d)" % (st.st_uid, uid)
    if st.st_mode & 0o022:
        return "is writable by other users (mode %o)" % (st.st_mode & 0o777)
    return None


def ensure_cache_dir(d):
    """Create the hook cache 0700, or accept an existing one only if it is a real directory of ours
    that no one else can write. Raises BuildError saying what to fix."""
    os.makedirs(os.path.dirname(d) or ".", exist_ok=True)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    why = "is not a directory" if not stat.S_ISDIR(st.st_mode) else _writable_by_others(st, os.getuid())
    if why:
        raise BuildError("the hook cache %s %s: not loading a hook from it; remove it (rm -r %s) and the agent "
                         "makes a private one" % (d, why, shlex.quote(d)))
    return d


def load_checked(path):
    """Load the built hook, having checked the very file that is loaded: a regular file of ours
    that no one else can write, in a directory of the same kind. Opened without following a link
    and loaded through its descriptor (/proc/self/fd), so no rename between check and load swaps
    it. Raises BuildError where the check fails."""
    import ctypes

    uid = os.getuid()
    d = os.path.dirname(os.path.abspath(path))
    st = os.lstat(d)
    why = "is not a directory" if not stat.S_ISDIR(st.st_mode) else _writable_by_others(st, uid)
    if why:
        raise BuildError("the hook's directory %s %s: not loaded; remove it (rm -r %s)" % (d, why, shlex.quote(d)))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise BuildError("the hook %s cannot be opened (%s): not loaded" % (path, e.strerror or e))
    try:
        st = os.fstat(fd)
        why = "is not a regular file" if not stat.S_ISREG(st.st_mode) else _writable_by_others(st, uid)
        if why:
            raise BuildError("the hook %s %s: not loaded; remove it (rm %s)" % (path, why, shlex.quote(path)))
        via = "/proc/self/fd/%d" % fd
        return ctypes.CDLL(via if os.path.exists(via) else path)
    finally:
        os.close(fd)


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


def python_include():
    """The running interpreter's headers (Python.h) for cuda/pystack.c, or None where they are not
    installed (the hook is then built without Python stacks)."""
    import sysconfig

    d = sysconfig.get_paths().get("include")
    return d if d and os.path.exists(os.path.join(d, "Python.h")) else None


def build_command(torch, out, cxx, python=True):
    """The compiler command; `python`: build cuda/pystack.c against this interpreter's headers
    (else with GPUMEM_NO_PYTHON_H: no stacks)."""
    src = source_dir()
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I", src]
    for d in _include_dirs(torch):
        cmd += ["-I", d]
    py = python_include() if python else None
    cmd += ["-I", py] if py else ["-DGPUMEM_NO_PYTHON_H"]
    cmd += [os.path.join(src, "hook.cpp"), os.path.join(src, "pystack.c"), "-o", out, "-L", torch_lib, "-Wl,-rpath," + torch_lib]
    cmd += ["-lc10", "-lc10_cuda", "-ltorch_cpu"] + (["-ldl"] if py else [])  # -ldl: the walker looks the interpreter up (dlsym)
    return cmd


def wants_stacks(env=os.environ):
    """Whether this process asks for Python stacks (GPUMEM_TUI_STACKS): only then is the walker built
    against the interpreter's headers; otherwise its stub is (pystack.c, GPUMEM_NO_PYTHON_H)."""
    from .stacks import threshold

    return threshold(env, quiet=True) > 0  # the agent says a bad value once, as it starts


def cache_key(torch, cxx, python=True):
    h = hashlib.sha256()
    src = source_dir()
    for f in ("hook.cpp", "gpumem_ring.h", "pystack.h", "pystack.c"):
        with open(os.path.join(src, f), "rb") as fh:
            h.update(fh.read())
    h.update(repr((torch.__version__, getattr(torch.version, "git_version", ""), getattr(torch.version, "cuda", ""), cxx,
                   sys.version, python_include() if python else None)).encode())
    return h.hexdigest()[:16]


def hook_library(torch, env=os.environ, log=None):
    """Path of the built hook, building it if needed. Raises BuildError with the command and error."""
    cxx = _compiler(env)
    if not cxx:
        raise BuildError("no C++ compiler (g++, c++ or clang++) to build the hook; install one (e.g. `apt install g++`)")
    d = ensure_cache_dir(cache_dir(env))
    python = wants_stacks(env)
    key = cache_key(torch, cxx, python)
    out = os.path.join(d, "hook-%s.so" % key)
    if os.path.lexists(out):
        return out  # checked as it is loaded (load_checked)
    lock = os.open(os.path.join(d, "hook-%s.lock" % key), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building it: wait
        if os.path.lexists(out):
            return out
        tmp = "%s.%d.tmp" % (out, os.getpid())
        cmd = build_command(torch, tmp, cxx, python)
        if log:
            log("building the allocator hook: %s" % " ".join(shlex.quote(c) for c in cmd))
        try:
            compile_to(cmd, tmp, out, os.path.join(d, "hook-%s.log" % key))
        except BuildError:
            if "-DGPUMEM_NO_PYTHON_H" in cmd:
                raise
            # The Python stacks are what failed to build against these headers, most likely: the
            # hook without them (its log kept beside for the reason).
            cmd = build_command(torch, tmp, cxx, python=False)
            if log:
                log("building the allocator hook without Python stacks: %s" % " ".join(shlex.quote(c) for c in cmd))
            compile_to(cmd, tmp, out, os.path.join(d, "hook-%s.nostacks.log" % key))
    finally:
        os.close(lock)
    return out


def compile_to(cmd, tmp, out, log_path):
    """Run the compiler command `cmd` (which writes `tmp`) and publish `tmp` as `out`. On failure:
    the command and the compiler's whole output go to `log_path`, and BuildError says the command,
    the last lines, and where the log is."""
    line = " ".join(shlex.quote(c) for c in cmd)
    try:
        # umask 077 in the compiler only: the process's own umask is shared by the training's threads.
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", umask=0o077)
        output, code = p.stdout, p.returncode
    except OSError as e:  # the compiler itself cannot be started
        output, code = str(e), -1
    if code == 0 and not os.path.exists(tmp):
        output, code = output + "\n(the compiler succeeded but wrote no %s)" % tmp, -1
    if code != 0:
        try:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as f:
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
    # The linker may have kept the mode of an older file at this name: ours alone, whatever it did.
    os.chmod(tmp, 0o700)
    os.replace(tmp, out)
    return out
