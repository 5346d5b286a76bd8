"""Where an agent keeps its files (docs/protocol.md): one private directory per user."""
import os
import stat


def agent_dir(env=os.environ):
    if env.get("GPUMEM_TUI_DIR"):
        return env["GPUMEM_TUI_DIR"]
    uid = os.getuid()
    if os.path.isdir("/dev/shm"):
        return "/dev/shm/gpumem-tui-%d" % uid
    return os.path.join(env.get("TMPDIR") or "/tmp", "gpumem-tui-%d" % uid)


class UnsafeDirectory(Exception):
    pass


def ensure_private_dir(path):
    """Create the directory 0700, or check that an existing one is ours and closed to others."""
    try:
        os.makedirs(path, mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory("%s is not a directory" % path)
    if st.st_uid != os.getuid():
        raise UnsafeDirectory("%s belongs to uid %d, not to us (%d)" % (path, st.st_uid, os.getuid()))
    if st.st_mode & 0o077:
        raise UnsafeDirectory("%s is open to other users (mode %o)" % (path, st.st_mode & 0o777))
    return path


def write_private(path, data):
    """Write a file 0600 atomically: readers never see half a manifest."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
