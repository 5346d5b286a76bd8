"""Building the allocator hook (cuda/hook.cpp) against the torch this process imported.

Compiled once per torch build and hook source, cached under ~/.cache/gpumem-tui; a file lock makes
eight ranks starting at once build it once while the others wait. A failed build is reported with
its command and the compiler's words, and the agent falls back to polling.

The library runs inside the training, so only the user may have written it: the cache is 0700 (an
existing one must be ours and closed to writers other than us), the compiler runs under umask 077,
and the library is checked again as it is loaded (load_checked).

And only the user or root may have written what goes into it: the directories the compiler searches
are those torch's include_paths("cuda") names (found as it finds them: cuda_home), the site-packages torch lives in (pip's CUDA headers) and
sysconfig (Python.h), never from a sys.path entry; each, and every directory above it, is ours or
root's and closed to other writers (trust.unsafe_dir), and is named resolved. Torch's own come
first (-I: its c10 must win over another torch's headers the system may have); the others come
after the system's (-idirafter: a stdlib.h beside cuda_runtime.h is never the one compiled in). The
directories and the compiler's identity are in the cache key: a changed set builds again, once.
"""
import fcntl
import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig

from . import trust

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIRS = [os.path.join(HERE, "..", "..", "cuda"), os.path.join(HERE, "cuda")]


def source_dir():
    for d in SOURCE_DIRS:
        if os.path.exists(os.path.join(d, "hook.cpp")):
            return os.path.realpath(d)  # resolved, as build_command names it (_trusted)
    raise BuildError("the hook's source (cuda/hook.cpp) is not next to the agent")


class BuildError(Exception):
    pass


def cache_dir(env=None):
    env = trust.environ() if env is None else env
    base = env.get("XDG_CACHE_HOME")
    if not base:
        home = trust.home()
        if not home:
            raise BuildError("no home directory for uid %d to keep the hook in (no password entry%s)"
                             % (os.getuid(), "; the interpreter ignores $HOME and $XDG_CACHE_HOME: -E or -I" if trust.isolated() else ""))
        base = os.path.join(home, ".cache")
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


def _compiler(env=None):
    """The compiler to build with, as a path: GPUMEM_HOOK_CXX, CXX (read only where the interpreter
    reads its environment: trust.environ), else g++, c++ or clang++ on PATH (the system's default
    path where PATH is not read)."""
    env = trust.environ() if env is None else env
    search = env.get("PATH") or os.defpath
    for cxx in [env.get("GPUMEM_HOOK_CXX"), env.get("CXX"), "g++", "c++", "clang++"]:
        if not cxx:
            continue
        found = cxx if os.path.isabs(cxx) and os.access(cxx, os.X_OK) else shutil.which(cxx, path=search)
        if found:
            return found
    return None


def compiler_identity(cxx):
    """What names the compiler in the cache key: its resolved path, size and time (an upgrade, or
    another compiler at the same name, builds again)."""
    real = os.path.realpath(cxx)
    try:
        st = os.stat(real)
    except OSError:
        return (cxx, real)
    return (cxx, real, st.st_size, st.st_mtime_ns)


def _trusted_compiler(cxx):
    """Raise BuildError where the compiler (resolved) or its directory could be another user's."""
    real = os.path.realpath(cxx)
    try:
        st = os.stat(real)
    except OSError as e:
        raise BuildError("the compiler %s cannot be read (%s)" % (cxx, e.strerror or e))
    why = trust.unsafe_dir(os.path.dirname(real))
    if not why and st.st_uid not in (os.getuid(), 0):
        why = "%s belongs to uid %d, neither to us (%d) nor to root" % (real, st.st_uid, os.getuid())
    if not why and st.st_mode & 0o022:
        why = "%s is writable by other users (mode %o)" % (real, stat.S_IMODE(st.st_mode))
    if why:
        raise BuildError("not building the hook with the compiler %s: %s" % (cxx, why))


def _trusted(d, what):
    """`d` resolved, where it and the directories above it are ours or root's and closed to other
    writers (trust.unsafe_dir); else BuildError naming it."""
    why = trust.unsafe_dir(d)
    if why:
        raise BuildError("not building the hook against %s %s: %s" % (what, d, why))
    return os.path.realpath(d)


def torch_dir(torch):
    return os.path.realpath(os.path.dirname(torch.__file__))


def cuda_home(env=None):
    """The CUDA toolkit torch's extensions build against, found as torch.utils.cpp_extension finds
    it (CUDA_HOME or CUDA_PATH, else the directory above nvcc on PATH, else /usr/local/cuda), read
    through trust.environ(); None where there is none. Not cpp_extension itself: it imports
    setuptools (0.44 s after torch on an H200 host, on every start, for the key) and setuptools puts
    its own _vendor directory on sys.path, which trust.only_trusted rightly does not search."""
    env = trust.environ() if env is None else env
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if not home:
        nvcc = shutil.which("nvcc", path=env.get("PATH") or os.defpath)
        home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else "/usr/local/cuda"
    return home if os.path.isdir(home) else None


def _torch_include_paths(torch):
    """torch's include_paths("cuda"): its include directory and the C++ API's inside it, and the
    CUDA toolkit's (never /usr/include, as torch leaves it out: the system's are searched anyway)."""
    inc = os.path.join(torch_dir(torch), "include")
    dirs = [inc, os.path.join(inc, "torch", "csrc", "api", "include")]
    home = cuda_home()
    if home and os.path.realpath(os.path.join(home, "include")) != "/usr/include":
        dirs.append(os.path.join(home, "include"))
    return dirs


def include_flags(torch, python=True):
    """The compiler's search directories, as flags: torch's include_paths (those inside torch's own
    directory with -I, the CUDA toolkit's with -idirafter), pip's CUDA headers only from the
    site-packages torch itself lives in (for a machine with no CUDA toolkit), and, where `python`,
    this interpreter's Python.h directory. Each checked (_trusted); a missing one is left out.
    Raises BuildError naming a directory that is not safe."""
    own = torch_dir(torch)
    flags = []
    for d in _torch_include_paths(torch):
        if os.path.isdir(d):
            real = _trusted(d, "torch's include directory")
            flags += ["-I" if real == own or real.startswith(own + os.sep) else "-idirafter", real]
    pip_cuda = os.path.join(os.path.dirname(own), "nvidia", "cuda_runtime", "include")
    if os.path.isdir(pip_cuda):
        flags += ["-idirafter", _trusted(pip_cuda, "pip's CUDA headers")]
    py = python_include() if python else None
    if py:
        flags += ["-idirafter", _trusted(py, "this interpreter's headers")]
    return flags


def python_include():
    """The running interpreter's headers (Python.h) for cuda/pystack.c, or None where they are not
    installed (the hook is then built without Python stacks)."""
    d = sysconfig.get_paths().get("include")
    return d if d and os.path.exists(os.path.join(d, "Python.h")) else None


def build_command(torch, out, cxx, python=True, flags=None):
    """The compiler command (nothing is run); `python`: build cuda/pystack.c against this
    interpreter's headers (else with GPUMEM_NO_PYTHON_H: no stacks). `flags`: include_flags(torch,
    python), where the caller has them already. Raises BuildError naming a directory not safe to
    build from or link against."""
    src = _trusted(source_dir(), "the hook's source")
    torch_lib = _trusted(os.path.join(torch_dir(torch), "lib"), "torch's libraries")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    flags = include_flags(torch, python) if flags is None else flags
    py = bool(python) and python_include() is not None
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I", src] + flags
    cmd += [] if py else ["-DGPUMEM_NO_PYTHON_H"]
    # -L and the rpath: torch's own lib directory, checked as the headers are (the linker searches
    # it for every library, the C++ runtime's too).
    cmd += [os.path.join(src, "hook.cpp"), os.path.join(src, "pystack.c"), "-o", out, "-L", torch_lib, "-Wl,-rpath," + torch_lib]
    cmd += ["-lc10", "-lc10_cuda", "-ltorch_cpu"] + (["-ldl"] if py else [])  # -ldl: the walker looks the interpreter up (dlsym)
    return cmd


def wants_stacks(env=None):
    """Whether this process takes Python stacks (on unless GPUMEM_TUI_STACKS turns them off): only
    then is the walker built against the interpreter's headers; otherwise its stub is (pystack.c,
    GPUMEM_NO_PYTHON_H)."""
    from .stacks import threshold

    return threshold(trust.environ() if env is None else env, quiet=True) > 0  # the agent says a bad value once, as it starts


def cache_key(torch, cxx, python=True, flags=None):
    """The built hook's name: its sources, the torch and interpreter, the compiler's identity and
    every directory the compiler searches (include_flags)."""
    h = hashlib.sha256()
    src = source_dir()
    for f in ("hook.cpp", "gpumem_ring.h", "pystack.h", "pystack.c"):
        with open(os.path.join(src, f), "rb") as fh:
            h.update(fh.read())
    flags = include_flags(torch, python) if flags is None else flags
    h.update(repr((torch.__version__, getattr(torch.version, "git_version", ""), getattr(torch.version, "cuda", ""),
                   compiler_identity(cxx), sys.version, python, flags)).encode())
    return h.hexdigest()[:16]


def compiler_env(env):
    """The compiler's environment: the process's own, or where the interpreter reads none
    (trust.isolated) only what trust.environ() gives and the system's default PATH."""
    if env is os.environ:
        return None
    out = dict(env)
    out.setdefault("PATH", os.defpath)
    return out


def hook_library(torch, env=None, log=None):
    """Path of the built hook, building it if needed. Raises BuildError with the command and error."""
    env = trust.environ() if env is None else env
    cxx = _compiler(env)
    if not cxx:
        raise BuildError("no C++ compiler (g++, c++ or clang++) to build the hook; install one (e.g. `apt install g++`)")
    _trusted_compiler(cxx)
    d = ensure_cache_dir(cache_dir(env))
    python = wants_stacks(env)
    flags = include_flags(torch, python)
    key = cache_key(torch, cxx, python, flags)
    out = os.path.join(d, "hook-%s.so" % key)
    if os.path.lexists(out):
        return out  # checked as it is loaded (load_checked)
    lock = os.open(os.path.join(d, "hook-%s.lock" % key), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building it: wait
        if os.path.lexists(out):
            return out
        tmp = "%s.%d.tmp" % (out, os.getpid())
        cmd = build_command(torch, tmp, cxx, python, flags)
        if log:
            log("building the allocator hook: %s" % " ".join(shlex.quote(c) for c in cmd))
        try:
            compile_to(cmd, tmp, out, os.path.join(d, "hook-%s.log" % key), compiler_env(env))
        except BuildError:
            if "-DGPUMEM_NO_PYTHON_H" in cmd:
                raise
            # The Python stacks are what failed to build against these headers, most likely: the
            # hook without them (its log kept beside for the reason).
            cmd = build_command(torch, tmp, cxx, python=False)
            if log:
                log("building the allocator hook without Python stacks: %s" % " ".join(shlex.quote(c) for c in cmd))
            compile_to(cmd, tmp, out, os.path.join(d, "hook-%s.nostacks.log" % key), compiler_env(env))
    finally:
        os.close(lock)
    return out


def compile_to(cmd, tmp, out, log_path, env=None):
    """Run the compiler command `cmd` (which writes `tmp`; in environment `env`, None: ours) and
    publish `tmp` as `out`. On failure:
    the command and the compiler's whole output go to `log_path`, and BuildError says the command,
    the last lines, and where the log is."""
    line = " ".join(shlex.quote(c) for c in cmd)
    try:
        # umask 077 in the compiler only: the process's own umask is shared by the training's threads.
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", umask=0o077, env=env)
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
