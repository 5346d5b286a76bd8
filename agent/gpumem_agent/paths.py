"""Where an agent keeps its files, and how it creates them (docs/protocol.md, "The agent directory").

The rules, mirrored by the monitor in src/collect/agent-dirs.ts:
- the directory: `$GPUMEM_TUI_DIR`, else `$XDG_RUNTIME_DIR/gpumem-tui` where that runtime directory
  is private (ours, a real directory, closed to others), else `/dev/shm/gpumem-tui-<uid>`, else
  `$TMPDIR` (or /tmp) `/gpumem-tui-<uid>`;
- a directory is trusted only if lstat says: a real directory (no symlink), ours, mode & 0o077 == 0;
- where that name is taken (another user's, a symlink, open mode, a file), the agent uses a private
  sibling `<name>.<random>` (ours, 0700) that the monitor finds by listing the parent;
- files are created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, 0600) under unpredictable
  names and renamed into place only over nothing or a regular file of ours: a link, FIFO or
  another user's file planted at a name is refused (UnsafeFile), never followed or replaced.
"""
import os
import secrets
import stat
import tempfile


def _private_reason(path, uid):
    """Why `path` is not a directory only `uid` controls, or None (lstat: a link is not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != uid:
        return "owned by uid %d, not by us (%d)" % (st.st_uid, uid)
    if st.st_mode & 0o077:
        return "open to other users (mode %o)" % (st.st_mode & 0o777)
    return None


def agent_dir(env=None):
    """The agents' directory this process asks for (before any squatted name sends it elsewhere);
    `env`: the environment as the agent reads it (trust.environ(): none of it under -E/-I)."""
    if env is None:
        from . import trust

        env = trust.environ()
    if env.get("GPUMEM_TUI_DIR"):
        return env["GPUMEM_TUI_DIR"]
    uid = os.getuid()
    # The session's own runtime directory is private by construction, where it is what it claims to be.
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _private_reason(runtime, uid) is None:
        return os.path.join(runtime, "gpumem-tui")
    if os.path.isdir("/dev/shm"):
        return "/dev/shm/gpumem-tui-%d" % uid
    return os.path.join(env.get("TMPDIR") or "/tmp", "gpumem-tui-%d" % uid)


class UnsafeDirectory(Exception):
    pass


def ensure_private_dir(path):
    """Create the directory 0700, or check that an existing one is ours and closed to others."""
    try:
        os.makedirs(path, 0o700)
    except FileExistsError:
        pass
    why = _private_reason(path, os.getuid())
    if why:
        raise UnsafeDirectory("%s is %s" % (path, why))
    return path


def _fallback_suffix(name):
    return len(name) > 1 and name[0] == "." and all(c.isalnum() or c == "_" for c in name[1:])


MAX_FALLBACK_CHECKS = 256


def open_agent_dir(path):
    """The directory to use for `path`: `path` itself when it is (or can be made) private; else a
    private sibling `<path>.<random>`, one of ours already there or a new one, and a note that says
    why. Raises OSError where neither can be had (the parent is missing or closed to us)."""
    try:
        return ensure_private_dir(path), None
    except UnsafeDirectory as e:
        why = str(e)
    except OSError as e:  # e.g. a parent closed to us
        why = "%s cannot be made (%s)" % (path, e.strerror or e)
    uid = os.getuid()
    parent, base = os.path.split(os.path.abspath(path))
    found = None
    try:
        # At most MAX_FALLBACK_CHECKS names are looked at: another user can plant thousands shaped
        # like ours, and this runs as the program starts. Past them, a new fallback of our own.
        candidates = (n for n in sorted(os.listdir(parent)) if n.startswith(base) and _fallback_suffix(n[len(base):]))
        for _, name in zip(range(MAX_FALLBACK_CHECKS), candidates):
            if _private_reason(os.path.join(parent, name), uid) is None:
                found = os.path.join(parent, name)
                break
    except OSError:
        pass
    # mkdtemp: 0700, an unpredictable name, and mkdir fails rather than follow anything planted.
    fallback = found or tempfile.mkdtemp(prefix=base + ".", dir=parent)
    return fallback, "the agents' directory %s; using %s instead (the monitor finds it too)" % (why, fallback)


def create_exclusive(path):
    """Open a new file beside `path` for writing: an unpredictable name, O_EXCL|O_NOFOLLOW, 0600,
    non-blocking (nothing planted can hold the open). Returns (fd, tmp_path); publish it with
    os.replace(tmp_path, path) once `check_replaceable(path)` allows."""
    d, base = os.path.split(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(d, ".%s.%s.tmp" % (base, secrets.token_hex(8)))
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError("no free temporary name beside %s" % path)


class UnsafeFile(OSError):
    """A name the agent will not write over, in words: "not writing PATH: why"."""


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a file"


def check_replaceable(path):
    """Raise UnsafeFile unless `path` is free or a regular file of ours (lstat: a link is never
    followed). The rules of the monitor's --output (src/system/private-file.ts): a link, a FIFO
    or anything not a regular file, and another user's file are refused, never replaced: the
    name was planted, or is someone else's to keep."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        why = "it is a symbolic link (never followed)"
    elif not stat.S_ISREG(st.st_mode):
        why = "not a regular file (%s)" % _kind(st.st_mode)
    elif st.st_uid != os.geteuid():
        why = "it belongs to another user (uid %d)" % st.st_uid
    else:
        return
    raise UnsafeFile("not writing %s: %s" % (path, why))


def publish(path, write):
    """Write a file 0600 atomically through `write(binary file object)`: created exclusively beside
    `path` and renamed onto it where check_replaceable allows (a link, FIFO or another user's file
    at `path` raises UnsafeFile and stays as it was); the temporary file is removed on any error.
    Between the check and the rename a name planted is replaced, never followed or opened."""
    check_replaceable(path)
    fd, tmp = create_exclusive(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        check_replaceable(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_private(path, data):
    """Write a file 0600 atomically: readers never see half a manifest."""
    return publish(path, lambda f: f.write(data))
