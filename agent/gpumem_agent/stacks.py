"""The Python stacks of allocations (cuda/pystack.h): the hook captures them on the allocating
thread, sampled by allocated bytes, and interns each distinct stack; its alloc records carry the
stack's id. Here: the settings from the environment, turning capture on, and the table of stacks
(id -> frames) read from the hook on the sync thread for the manifest.

GPUMEM_TUI_STACKS (on by default, under `run` and `attach`):
  unset, "" or "on"  every allocation of 1 MiB or more, and smaller ones sampled at one per 512 KiB
                     allocated (an allocation of s bytes with probability 1 - exp(-s / 512 KiB))
  "0" or "off"       none
  "SIZE"             every allocation of SIZE or more, smaller ones sampled at the default rate
  "SIZE:RATE"        the same, sampled at one per RATE bytes ("1M:0": none below SIZE)
Sizes in bytes or with a K, M or G suffix ("1M", "256K"). Under `python -E` or `-I` the agent reads
no setting of its own (trust.py): the defaults apply.
"""
import ctypes
import re
import sys
import sysconfig
import threading

from .wire import FEATURE_ALLOC_STACKS

ENV = "GPUMEM_TUI_STACKS"
# What the monitor takes for library code beyond its default rule, and for the user's code wherever
# it lies (src/snapshot/block-stacks.ts): the hook follows them to choose which frames a stack keeps.
LIBRARY_ENV = "GPUMEM_TUI_LIBRARY"
USER_CODE_ENV = "GPUMEM_TUI_USER_CODE"
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# Every allocation this large carries its stack; smaller ones one per this many bytes allocated, on
# average: what the hook's walk costs a training step at that rate is in bench/results (README,
# "Which line").
DEFAULT_MIN_BYTES = 1 << 20
DEFAULT_SAMPLE_BYTES = 512 << 10
TEXT_BYTES = 16 * 1024  # a stack's text: at most 16 frames of path, line and name
# New stacks rewrite the manifest (every stack in it: some 80 ms of the GIL for 2,000 stacks here),
# and sampling finds a rarely sampled line's stack now and then for as long as the training runs:
# such rewrites are spaced so that they take at most this share of the time.
WRITE_SHARE = 0.01
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
OFF = (0, 0)


def _size(text):
    """A size in bytes ("512K"), or None where `text` is not one."""
    t = text.strip()
    unit = t[-1:].upper() if t[-1:].upper() in _UNITS else ""
    digits = t[: len(t) - len(unit)]
    return int(digits) * _UNITS[unit] if digits.isdigit() else None


def settings(env, quiet=False):
    """(threshold, sample bytes) in bytes; (0, 0): off. A value that cannot be read is said on
    stderr (the user set it on purpose; once: `quiet` elsewhere) and leaves stacks off: monitoring
    goes on."""
    v = (env.get(ENV) or "").strip()
    if v.lower() in ("", "on"):
        return DEFAULT_MIN_BYTES, DEFAULT_SAMPLE_BYTES
    if v.lower() in ("0", "off"):
        return OFF
    min_text, sep, rate_text = v.partition(":")
    n = _size(min_text)
    rate = _size(rate_text) if sep else DEFAULT_SAMPLE_BYTES
    if not n or rate is None:
        if not quiet:
            sys.stderr.write("gpumem-agent: %s=%s is not a size in bytes, or a size and a sampling rate (such as 1M or 1M:512K); "
                             "stacks are off\n" % (ENV, v))
        return OFF
    return n, rate


def threshold(env, quiet=False):
    """The threshold alone (0: off)."""
    return settings(env, quiet)[0]


class Stacks:
    """The hook's stack table as the manifest carries it: {"id": [[file, line, function], ...]},
    innermost frame first."""

    def __init__(self, hook, min_bytes, sample_bytes=0):
        self.hook = hook
        self.min_bytes = min_bytes
        self.sample_bytes = sample_bytes
        self.table = {}
        self._lock = threading.Lock()  # the sync thread and whoever writes a manifest
        self._pending = False  # stacks read that no manifest written has yet
        self._due = 0.0  # time.monotonic() from which a manifest may be written for them
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

    def due(self, new, now):
        """Whether the manifest is to be written now for stacks read (`new`: some were just now):
        at once for the first, then spaced (written())."""
        self._pending = self._pending or bool(new)
        return self._pending and now >= self._due

    def written(self, now, seconds):
        """A manifest, with every stack read, took `seconds` to write at `now`: the next one for
        new stacks alone waits until that is WRITE_SHARE of the time between."""
        self._pending = False
        self._due = now + seconds / WRITE_SHARE

    def manifest(self):
        """Every stack interned up to now (read here too: a manifest written at exit has them all)."""
        with self._lock:
            self._read_new()
            return {"stack_min_bytes": self.min_bytes, "stack_sample_bytes": self.sample_bytes, "stacks": dict(self.table)}


def manifest_off():
    """The manifest's stack fields where there are none."""
    return {"stack_min_bytes": 0, "stack_sample_bytes": 0, "stacks": {}}


def rule_entries(text):
    """A rule variable's entries as the monitor reads them (user-frame.ts parseRuleEntries):
    separated by ":" or ",", each a path prefix (with a "/") or a dotted module name. One that is
    neither is left out here: the monitor says it."""
    return [e for e in (raw.strip() for raw in re.split(r"[:,]", text or "")) if e and ("/" in e or _MODULE.match(e))]


def set_rule(hook, env):
    """The user's library and user-code entries into the hook (while its stacks are off): 0 or -errno;
    0 where the hook has no rule to set (an older build)."""
    fn = getattr(hook, "gpumem_hook_stack_rule", None)
    if fn is None:
        return 0
    fn.argtypes, fn.restype = [ctypes.c_char_p, ctypes.c_char_p], ctypes.c_int
    join = lambda name: "\n".join(rule_entries(env.get(name))).encode("utf-8", "surrogateescape")
    rc = fn(join(LIBRARY_ENV), join(USER_CODE_ENV))
    if rc != 0:
        fn(b"", b"")  # the default rule, not one left from an earlier attach
    return rc


def set_stacks(hook, min_bytes, sample_bytes):
    """The hook's switch (cuda/hook.cpp gpumem_hook_stacks): 0 or -errno. (0, 0) turns capture off."""
    hook.gpumem_hook_stacks.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    hook.gpumem_hook_stacks.restype = ctypes.c_int
    return hook.gpumem_hook_stacks(min_bytes, sample_bytes)


def start(hook, features, env, notes):
    """Stacks from the hook (on unless GPUMEM_TUI_STACKS turns them off) where it can; else None,
    with the reason in `notes` where they were not turned off on purpose (notes say what the process
    runs without; the manifest's stack_min_bytes and stack_sample_bytes say the threshold and rate)."""
    min_bytes, sample_bytes = settings(env)
    if not min_bytes:
        return None
    if not hook or not features & FEATURE_ALLOC_STACKS:
        here = "Python %d.%d%s" % (sys.version_info[:2] + (", free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "",))
        notes["stacks"] = ("off: this build of the hook captures no Python stacks (it needs this interpreter's "
                           "headers, Python.h, and Python 3.11 to 3.14 with the GIL; %s here)" % here)
        return None
    rc = set_stacks(hook, 0, 0)  # the rule is set while the hook walks no stack
    if rc == 0:
        if set_rule(hook, env) != 0:  # -E2BIG: the one way it fails
            sys.stderr.write("gpumem-agent: %s and %s are longer than the hook keeps (4 KiB each); it keeps frames by the default "
                             "rule, the monitor names lines by yours\n" % (LIBRARY_ENV, USER_CODE_ENV))
        rc = set_stacks(hook, min_bytes, sample_bytes)
    if rc != 0:
        notes["stacks"] = ("off: the hook does not know this interpreter's frames (no CPython 3.14 debug offsets at _PyRuntime)"
                           if rc == -38 else "off: the hook could not turn stacks on (error %d)" % -rc)
        return None
    return Stacks(hook, min_bytes, sample_bytes)
