"""What the agent trusts, in one place (README, "No change to the program"; docs/protocol.md, the bootstrap).

- environ(): the environment the agent reads. Where the interpreter was started not to read its
  own (`python -E`, `-I`), the agent reads none of its settings either (GPUMEM_*, CXX, HOME, XDG_*,
  TMPDIR, PATH): only the facts a job's launcher sets (ranks, CUDA_VISIBLE_DEVICES), which it reports.
- refusal(): where the real and effective uid or gid differ (a setuid or setgid interpreter), the
  agent would act with rights that whoever wrote its environment does not have: it does not start.
- unsafe_dir(): a directory, and every one above it, holds only what we or root put there.
- only_trusted(): the imports made on this thread come from the interpreter's own library
  directories (and the agent's), never from the program's script directory, the working directory,
  PYTHONPATH or a .pth's additions, whatever sys.path says.

Loaded three ways: as gpumem_agent.trust; by its file from sitecustomize (`run`); as text ahead of
the bootstrap (`attach`, src/attach/bootstrap.ts). So it imports only what every interpreter has
loaded before any program code runs: os, sys, stat, _thread and the import system itself.
"""
import _thread
import os
import stat
import sys

# What a launcher sets and the manifest reports (agent.py): read even under -E and -I, where no
# setting of ours is.
FACTS = frozenset([
    "CUDA_VISIBLE_DEVICES", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "SLURM_STEP_ID",
    "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
    "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
    "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
    "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "GROUP_RANK", "SLURM_NODEID",
    # the allocator's settings: torch reads them from C++ under -E too, and the manifest reports them
    "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
])


class Refused(Exception):
    """The agent does not start here; the message is the one line that says why."""


def isolated():
    """Whether the interpreter was told to ignore its environment (-E, or -I which implies it)."""
    return bool(getattr(sys.flags, "ignore_environment", 0) or getattr(sys.flags, "isolated", 0))


def environ():
    """The environment the agent reads (every read of GPUMEM_*, CXX, HOME, ... goes through here)."""
    if not isolated():
        return os.environ
    return {k: v for k, v in os.environ.items() if k in FACTS}


def home():
    """Our home directory: $HOME where the environment is read, else the password database's; None
    where neither says (a uid with no entry)."""
    d = os.path.expanduser("~") if not isolated() else None
    if d and d != "~":
        return d
    import pwd  # built into CPython on Linux: no file is looked up

    try:
        return pwd.getpwuid(os.getuid()).pw_dir or None
    except KeyError:
        return None


def refusal():
    """Why the agent must not start in this process, or None."""
    uid, euid, gid, egid = os.getuid(), os.geteuid(), os.getgid(), os.getegid()
    if uid != euid or gid != egid:
        return ("this process runs as uid %d gid %d with effective uid %d gid %d (a setuid or setgid program): "
                "the agent does not start where it would act with another user's rights" % (uid, gid, euid, egid))
    return None


def unsafe_dir(path, uid=None):
    """Why directory `path` could hold what another user put there, or None. Checked on its resolved
    path (use os.path.realpath(path) after: a link someone else can change is then never followed):
    it and every directory above it belong to us or root and are closed to other writers. Above it,
    a sticky directory (/tmp) is closed enough: no one else can rename or remove what is ours in it.
    The parents matter as much as the directory: a parent others can write lets them move the
    checked directory away and put their own in its place."""
    uid = os.getuid() if uid is None else uid
    d = os.path.realpath(path)
    first = True
    while True:
        try:
            st = os.lstat(d)
        except OSError as e:
            return "%s cannot be read (%s)" % (d, e.strerror or e)
        if not stat.S_ISDIR(st.st_mode):
            return "%s is not a directory" % d
        if st.st_uid not in (uid, 0):
            return "%s belongs to uid %d, neither to us (%d) nor to root" % (d, st.st_uid, uid)
        if st.st_mode & 0o022 and (first or not st.st_mode & stat.S_ISVTX):
            return "%s is writable by other users (mode %o)" % (d, stat.S_IMODE(st.st_mode))
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d, first = parent, False


def interpreter_dirs():
    """Where this interpreter's own modules are: its standard library and lib-dynload, the site
    directories `site` computed from its prefixes (a venv's included) and the user's own where
    enabled, and the directory the program's torch was imported from."""
    stdlib = getattr(sys, "_stdlib_dir", None) or os.path.dirname(os.__file__)
    dirs = [stdlib, os.path.join(stdlib, "lib-dynload")]
    site = sys.modules.get("site")
    if site is not None:
        try:
            dirs += list(site.getsitepackages())
        except Exception:
            pass
        if getattr(site, "ENABLE_USER_SITE", False) and isinstance(getattr(site, "USER_SITE", None), str):
            dirs.append(site.USER_SITE)
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if isinstance(torch_file, str):
        dirs.append(os.path.dirname(os.path.dirname(torch_file)))
    return dirs


def trusted_paths(root=None):
    """The directories only_trusted() imports from, resolved, in order: `root` (the agent's own) and
    the interpreter's, each that exists and passes unsafe_dir."""
    out = []
    for d in ([root] if root else []) + interpreter_dirs():
        if isinstance(d, str) and os.path.isdir(d) and unsafe_dir(d) is None:
            real = os.path.realpath(d)
            if real not in out:
                out.append(real)
    return out


MARK = "gpumem_trusted_imports"  # the attribute that names our finder in sys.meta_path


class TrustedFinder:
    """First on sys.meta_path, and inert except on a thread inside only_trusted(): there, a
    top-level module is found as the import system would (built in, frozen, then by path) but on
    the trusted paths only, and one found nowhere there is not looked for further. A submodule is
    left to its package's own __path__ (a package found here lives in a trusted directory)."""

    gpumem_trusted_imports = 1

    def __init__(self):
        self.local = _thread._local()

    def find_spec(self, name, path=None, target=None):
        paths = getattr(self.local, "paths", None)
        if paths is None or path is not None:
            return None
        boot = sys.modules["_frozen_importlib"]
        for finder in (boot.BuiltinImporter, boot.FrozenImporter):
            spec = finder.find_spec(name, None, target)
            if spec is not None:
                return spec
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(name, paths, target)
        if spec is None:
            raise ModuleNotFoundError("no module named %r in the interpreter's own directories (%s)" % (name, ", ".join(paths)), name=name)
        return spec


def _finder():
    """The one TrustedFinder of this process (whichever copy of this file put it there), put first
    on sys.meta_path the first time. It stays: taking it out could make another thread's import,
    walking the list at that moment, skip a finder."""
    for f in list(sys.meta_path):
        if getattr(f, MARK, None):
            return f
    f = TrustedFinder()
    sys.meta_path.insert(0, f)
    return f


class only_trusted:
    """`with only_trusted(root):` this thread's imports come from trusted_paths(root) alone; other
    threads (the program's) import as they always do. Nests; the outermost computes the paths."""

    def __init__(self, root=None):
        self.root = root

    def __enter__(self):
        self.finder = _finder()
        self.saved = getattr(self.finder.local, "paths", None)
        if self.saved is None:
            self.finder.local.paths = trusted_paths(self.root)
        return self

    def __exit__(self, *exc):
        self.finder.local.paths = self.saved
        return False


def load(root, name):
    """Module `name` (the package root/name/, else root/name.py) by its location, never searched
    for on sys.path; one the process already has is returned as it is."""
    if name in sys.modules:
        return sys.modules[name]
    external, boot = sys.modules["_frozen_importlib_external"], sys.modules["_frozen_importlib"]
    package = os.path.join(root, name)
    if os.path.isfile(os.path.join(package, "__init__.py")):
        spec = external.spec_from_file_location(name, os.path.join(package, "__init__.py"), submodule_search_locations=[package])
    else:
        spec = external.spec_from_file_location(name, os.path.join(root, name + ".py"))
    module = boot.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_agent(root, name="gpumem_agent"):
    """The agent's module from its own directory `root`, with only trusted imports. Raises Refused
    (one line) where this process or that directory cannot be trusted."""
    why = refusal()
    if why:
        raise Refused(why)
    why = unsafe_dir(root)
    if why:
        raise Refused("the agent's directory is not safe to import from: %s" % why)
    with only_trusted(os.path.realpath(root)):
        return load(os.path.realpath(root), name)


def agent_root():
    """The directory that holds this gpumem_agent package (where this file is a module of it)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
