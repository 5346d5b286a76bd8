"""What `gpumem-tui attach` runs inside a process it did not start (docs/protocol.md, "Attaching to
a running process").

The helper (cuda/inject.c) queues this text with Py_AddPendingCall, so it runs on the main thread
at a safe point of the interpreter, from a private page the helper mapped. The monitor wraps it in
`exec(..., {fresh dict})` inside `try/except BaseException`, so it binds no name in the program's
__main__, and ends it with one call of `boot(...)`. Its whole job, in this order:

1. give the page back (munmap): every attach, used or not, leaves no mapping behind;
2. claim the one-time token: a file the monitor created (0600, ours, in the agents' directory)
   holding a secret and a deadline. Claiming is removing it: if the monitor gave up first (it
   removed the token), or the deadline passed, or the file is not what it should be, nothing
   else happens: the pending call cannot be taken back, so it must be able to do nothing;
3. start one daemon thread, which imports the agent and calls `attach_running(token=PATH)`, with
   `monitor_pid` and `monitor_start` (its /proc start time) where a monitor owns the attach (the
   `attach` verb opening the screens, the `a` key): the agent detaches when that monitor exits.

It never raises: a pending call that fails becomes a SystemError in the program.

The monitor sends agent/gpumem_agent/trust.py's text ahead of this one (src/attach/bootstrap.ts):
every module this bootstrap and the agent import comes from the interpreter's own directories or the
agent's (only_trusted, load_agent), never from the program's script directory or working
directory, which sys.path names first; a setuid or setgid process is refused (Refused).
"""


BOOTSTRAP_NAME = "<gpumem-bootstrap>"  # the name the monitor compiles this text under


def _unmap(page, page_len):
    try:
        with only_trusted():  # noqa: F821 (trust.py's, sent ahead of this text)
            import ctypes

        munmap = ctypes.CDLL(None).munmap
        munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        munmap(page, page_len)
    except Exception:
        pass


def _claim(token, secret):
    """True once this process owns the attach: the token was there, ours, in date, and removed here."""
    import os
    import stat
    import time

    try:
        fd = os.open(token, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False  # removed: the monitor gave up
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return False
        fields = os.read(fd, 256).decode("ascii", "replace").split()
    finally:
        os.close(fd)
    if len(fields) != 2 or fields[0] != secret or not fields[1].isdigit():
        return False
    if time.time() * 1000 > int(fields[1]):
        return False  # stale: a monitor that died before it could remove it
    try:
        os.unlink(token)
    except OSError:
        return False  # the monitor removed it just now: it has said "not attached"
    return True


def _start(token, path, module, monitor_pid, monitor_start):
    import os

    try:
        # By its location in `path`, not through sys.path (trust.py); the agent imports its own
        # modules the same way.
        agent = load_agent(path, module)  # noqa: F821
        owner = {} if monitor_pid is None else {"monitor_pid": monitor_pid, "monitor_start": monitor_start}
        agent.attach_running(token=token, **owner)
    except BaseException as e:  # said to the monitor, never to the program
        try:
            fd = os.open(token + ".error", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("%s\n" % e if isinstance(e, Refused) else "%s: %s\n" % (type(e).__name__, e))  # noqa: F821
        except OSError:
            pass


def boot(token, secret, page, page_len, path, module, monitor_pid=None, monitor_start=None):
    _unmap(page, page_len)
    try:
        if not _claim(token, secret):
            return
        import sys

        with only_trusted():  # noqa: F821
            import threading

        # The program's frame the pending call interrupted, past our own two ("<string>", this).
        user = sys._getframe(1)
        while user is not None and user.f_code.co_filename in ("<string>", BOOTSTRAP_NAME):
            user = user.f_back
        t = threading.Thread(target=_start, args=(token, path, module, monitor_pid, monitor_start), name="gpumem-attach", daemon=True)
        # Where the bootstrap ran, for the agent's "attached at ..." and for the tests.
        t.gpumem_boot = {
            "thread": threading.get_ident(),
            "main_thread": threading.get_ident() == threading.main_thread().ident,
            "frame": (user.f_code.co_filename, user.f_code.co_name, user.f_lineno) if user is not None else None,
        }
        t.start()
    except BaseException:
        pass
