"""The Python stacks of large allocations (cuda/pystack.h): the hook captures them on the
allocating thread and interns each distinct stack; its alloc records carry the stack's id. Here:
the threshold from the environment, turning capture on, and the table of stacks (id -> frames)
read from the hook on the sync thread for the manifest.

GPUMEM_TUI_STACKS: the smallest allocation whose stack is captured, in bytes or with a K, M or G
suffix ("1M"); unset, 0 or "off": none.
"""
import ctypes
import sys
import sysconfig
import threading

from .wire import FEATURE_ALLOC_STACKS

ENV = "GPUMEM_TUI_STACKS"
TEXT_BYTES = 16 * 1024  # a stack's text: at most 16 frames of path, line and name
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def threshold(env, quiet=False):
    """The threshold in bytes (0: off). A value that cannot be read is said on stderr (the user
    set it on purpose; once: `quiet` elsewhere) and leaves stacks off: monitoring goes on."""
    v = (env.get(ENV) or "").strip()
    if v.lower() in ("", "0", "off"):
        return 0
    unit = v[-1:].upper() if v[-1:].upper() in _UNITS else ""
    try:
        n = int(v[: len(v) - len(unit)]) * _UNITS[unit]
    except ValueError:
        n = -1
    if n <= 0:
        if not quiet:
            sys.stderr.write("gpumem-agent: %s=%s is not a size in bytes (such as 1M); stacks are off\n" % (ENV, v))
        return 0
    return n


class Stacks:
    """The hook's stack table as the manifest carries it: {"id": [[file, line, function], ...]},
    innermost frame first."""

    def __init__(self, hook, min_bytes):
        self.hook = hook
        self.min_bytes = min_bytes
        self.table = {}
        self._lock = threading.Lock()  # the sync thread and whoever writes a manifest
        hook.gpumem_hook_stack_count.restype = ctypes.c_uint32
        hook.gpumem_hook_stack_text.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int]
        self._buf = ctypes.create_string_buffer(TEXT_BYTES)

    def read_new(self):
        """The stacks interned since the last read; True where there were any."""
        with self._lock:
            return self._read_new()

    def _read_new(self):
        n = self.hook.gpumem_hook_stack_count()
        first = len(self.table) + 1
        for k in range(first, n + 1):
            got = self.hook.gpumem_hook_stack_text(k, self._buf, TEXT_BYTES)
            frames = []
            for line in self._buf.value.decode("utf-8", "replace").splitlines() if got >= 0 else ():
                parts = line.split("\t")
                if len(parts) == 3:
                    frames.append([parts[0], int(parts[1]) if parts[1].lstrip("-").isdigit() else 0, parts[2]])
            self.table[str(k)] = frames
        return n >= first

    def manifest(self):
        """Every stack interned up to now (read here too: a manifest written at exit has them all)."""
        with self._lock:
            self._read_new()
            return {"stack_min_bytes": self.min_bytes, "stacks": dict(self.table)}


def start(hook, features, env, notes):
    """Stacks from the hook where asked (GPUMEM_TUI_STACKS) and it can; else None, with the reason
    in `notes` where they were asked for."""
    min_bytes = threshold(env)
    if not min_bytes:
        return None
    if not hook or not features & FEATURE_ALLOC_STACKS:
        here = "Python %d.%d%s" % (sys.version_info[:2] + (", free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "",))
        notes["stacks"] = ("off: this build of the hook captures no Python stacks (it needs this interpreter's "
                           "headers, Python.h, and Python 3.11 to 3.13 with the GIL; %s here)" % here)
        return None
    hook.gpumem_hook_stacks.argtypes = [ctypes.c_uint64]
    rc = hook.gpumem_hook_stacks(min_bytes)
    if rc != 0:
        notes["stacks"] = "off: the hook could not turn stacks on (error %d)" % -rc
        return None
    return Stacks(hook, min_bytes)
