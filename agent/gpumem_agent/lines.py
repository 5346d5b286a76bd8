"""The line profiler: which line of a decorated function allocated what, from the allocator's own
events (the ring), not from memory_stats() sampled per line as pytorch_memlab does.

    @gpumem_agent.profile            # every call
    @gpumem_agent.profile_every(10)  # every 10th call
    def train_step(batch): ...

While a decorated function runs, Python tells us each line it starts (sys.monitoring LINE events
on that code object only, Python 3.12+; a local trace function on older Pythons). At each line we
note the write index of the ring's lane that holds the profiled device's events (its own lane, or
the shared lane for a device without one: one number to read, as with a ring of one lane) and put
the line's id in the header (`cur_line`), which the hook stamps on every record. A lane is in the
order of the device's events, so no merging is needed. When the outermost decorated call returns,
the records written during it are split at those indices: each line gets the bytes allocated and freed while it ran, the peak of
active and reserved bytes while it ran, and its hit count. Code outside decorated functions runs
with no callback at all.

One decorated call at a time per process: the header holds one current line. Calls from several
threads at once are profiled as one.
"""
import atexit
import functools
import json
import linecache
import os
import struct
import sys
import threading

from . import paths, trust
from .ring import write_index_offset
from .totals import Totals, block_size
from .wire import ACTION as A, HEADER_OFFSET, RECORD_FIELDS

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
CUR_LINE = HEADER_OFFSET["cur_line"]
# Where a record tuple (ring.Ring.records) holds each field
F_SIZE, F_ACTION, F_DEVICE = (RECORD_FIELDS.index(f) for f in ("size", "action", "device"))


class LineStats:
    __slots__ = ("hits", "alloc_bytes", "freed_bytes", "n_alloc", "n_free", "peak_active", "peak_reserved")

    def __init__(self):
        self.hits = 0
        self.alloc_bytes = 0
        self.freed_bytes = 0
        self.n_alloc = 0
        self.n_free = 0
        self.peak_active = None
        self.peak_reserved = None

    def merge(self, other):
        """Add another run's figures (peaks: the higher)."""
        self.hits += other.hits
        self.alloc_bytes += other.alloc_bytes
        self.freed_bytes += other.freed_bytes
        self.n_alloc += other.n_alloc
        self.n_free += other.n_free
        if other.peak_active is not None:
            self.see(other.peak_active, other.peak_reserved)

    def see(self, active, reserved):
        if self.peak_active is None or active > self.peak_active:
            self.peak_active = active
        if self.peak_reserved is None or reserved > self.peak_reserved:
            self.peak_reserved = reserved

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


def attribute(records, log, end_index, device, active, reserved, stats):
    """Split `records` (RECORD tuples of one lane in index order; a record's index is its seq - 1) between the lines
    of `log` ([(line key, the lane's write index when the line began)], in order) and add them into `stats`
    ({line key: LineStats}). `active` and `reserved` are the device's bytes when the log began;
    a line's peaks are the highest levels while it ran, its start included. The levels move as the
    ring header's totals rule says (totals.py); a line's allocated and freed bytes are its alloc
    and free_requested records' blocks. Pure; returns the levels at the end."""
    t = Totals(active, reserved)
    k = 0
    cur = None
    for rec in records:
        index = rec[0] - 1
        while k < len(log) and log[k][1] <= index:
            cur = stats.setdefault(log[k][0], LineStats())
            cur.hits += 1
            cur.see(t.active, t.reserved)
            k += 1
        if rec[F_DEVICE] != device:
            continue
        action, size = rec[F_ACTION], rec[F_SIZE]
        t.apply(action, size)
        if cur is not None:
            if action == A["alloc"]:
                cur.alloc_bytes += block_size(size)
                cur.n_alloc += 1
            elif action == A["free_requested"]:
                cur.freed_bytes += block_size(size)
                cur.n_free += 1
            cur.see(t.active, t.reserved)
    while k < len(log) and log[k][1] <= end_index:
        cur = stats.setdefault(log[k][0], LineStats())
        cur.hits += 1
        cur.see(t.active, t.reserved)
        k += 1
    return t.active, t.reserved


class FunctionProfile:
    def __init__(self, code, name):
        self.code = code
        self.name = name
        self.calls = 0
        self.profiled_calls = 0
        self.lines = {}  # lineno -> LineStats
        self.lost = 0

    def as_dict(self):
        return {
            "function": self.name,
            "filename": self.code.co_filename,
            "first_line": self.code.co_firstlineno,
            "calls": self.calls,
            "profiled_calls": self.profiled_calls,
            "lost_records": self.lost,
            "lines": [dict(line=n, code=linecache.getline(self.code.co_filename, n).strip(), **s.as_dict()) for n, s in sorted(self.lines.items())],
        }


def _fmt(n):
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024.0


class Profiler:
    """The process's line profiler (one; gpumem_agent.profile uses it)."""

    def __init__(self, agent_getter):
        self._agent = agent_getter
        self.functions = {}  # code -> FunctionProfile
        self.line_ids = {}  # (filename, lineno) -> id, for the header and the manifest
        self.line_names = {}  # id -> "file:line"
        self.depth = 0
        self._map = None
        self._active = None
        self._outer = None
        self.lock = threading.RLock()
        self.warned = None
        self._log = []
        self._codes = set()
        self._mon = None
        self._printed = False
        atexit.register(self._at_exit)
        self._check_json()

    def _check_json(self):
        """Said once, as the first function is decorated, where GPUMEM_PROFILE_JSON cannot be
        written (a link or FIFO planted there): the user can move it before the run ends. The
        same line is not said again at exit (_say), where the name is checked once more."""
        path = trust.environ().get("GPUMEM_PROFILE_JSON")
        try:
            if path:
                paths.check_replaceable(path)
        except paths.UnsafeFile as e:
            self._say(self._json_refusal(path, e))
        except Exception:
            pass

    @staticmethod
    def _json_refusal(path, e):
        return str(e).replace("not writing %s" % path, "not writing GPUMEM_PROFILE_JSON=%s" % path, 1)

    # -- decorating ----------------------------------------------------------------------------

    def wrap(self, fn, every=1):
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError("profile_every(n): n must be a positive integer, got %r" % (every,))
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
        if code is None:
            raise TypeError("gpumem_agent.profile decorates Python functions and methods, not %r" % (fn,))
        if code.co_flags & 0x2A0:  # generator, coroutine, async generator: lines run across resumes
            raise TypeError("gpumem_agent.profile: %s is a generator or coroutine; decorate a plain function" % fn.__qualname__)
        fp = self.functions.setdefault(code, FunctionProfile(code, getattr(fn, "__qualname__", code.co_name)))

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            fp.calls += 1
            if (fp.calls - 1) % every:
                return fn(*args, **kwargs)
            return self._call(fp, fn, args, kwargs)

        wrapper.gpumem_profile = fp
        return wrapper

    # -- a profiled call -----------------------------------------------------------------------

    def _ready(self):
        """The agent's ring when events can be attributed, else None (and why, said once)."""
        a = self._agent()
        why = None
        if a is None:
            why = "gpumem_agent is not attached (GPUMEM_TUI_DISABLE=1?)"
        elif not a.started:
            try:
                a.torch.cuda.init()  # the agent starts with CUDA; a profiled function is about to use it
            except Exception as e:
                why = "CUDA could not start: %s" % e
        if a is not None and why is None:
            if a.ring is None or not a.active:
                why = "the agent did not start (GPUMEM_TUI_VERBOSE=1 says why)"
            elif a.mode != "hook":
                why = "the allocator hook is not running (%s): lines cannot be attributed" % (a.hook_error or a.mode)
        if why:
            self._say(why)
            return None
        return a

    def _call(self, fp, fn, args, kwargs):
        # The profiler never breaks the program: whatever fails in it, the function still runs,
        # once, and its result or exception is the caller's; the failure is said once on stderr.
        with self.lock:
            outer = self.depth == 0
            a = self._ready() if outer else self._active
            if a is None:
                profiling = False
            else:
                try:
                    if outer:
                        self._start(a)
                        self._active = a
                        self._outer = fp
                    self._codes.add(fp.code)
                    self._enable(fp.code)
                    self.depth += 1
                    fp.profiled_calls += 1
                    profiling = True
                except Exception as e:
                    self._say("could not start: %s: %s" % (type(e).__name__, e))
                    if outer:
                        self._stop_tracing()
                    profiling = False
        if not profiling:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    try:
                        self._finish(a, fp)
                    except Exception as e:
                        self._say("could not read the call's records: %s: %s" % (type(e).__name__, e))
                        self._stop_tracing()

    def _say(self, why):
        if self.warned != why:
            self.warned = why
            sys.stderr.write("gpumem_agent.profile: %s\n" % why)

    def _stop_tracing(self):
        """Every traced code object back to untraced, the header's line cleared, state reset."""
        for code in self._codes:
            try:
                self._disable(code)
            except Exception:
                pass
        self._codes = set()
        self._log = []
        self._active = None
        try:
            _U32.pack_into(self._map, CUR_LINE, 0)
        except Exception:
            pass

    def _start(self, a):
        torch = a.torch
        self._device = torch.cuda.current_device()
        s = torch.cuda.memory_stats(self._device)
        self._map = a.ring.map
        self._lane = a.ring.lane_of(self._device)
        self._write_index = write_index_offset(self._lane)
        self._start_index = _U64.unpack_from(self._map, self._write_index)[0]
        self._active0 = s.get("active_bytes.all.current", 0)
        self._reserved0 = s.get("reserved_bytes.all.current", 0)
        self._log = []

    def _on_line(self, code, lineno):
        # A line callback that raised would raise into the profiled function (and end tracing):
        # whatever fails here, that line goes unattributed and the function runs on.
        try:
            key = (code, lineno)
            lid = self.line_ids.get((code.co_filename, lineno))
            if lid is None:
                lid = self.line_ids[(code.co_filename, lineno)] = len(self.line_ids) + 1
                text = linecache.getline(code.co_filename, lineno).strip()
                self.line_names[str(lid)] = "%s:%d: %s" % (os.path.basename(code.co_filename), lineno, text[:80])
            m = self._map
            _U32.pack_into(m, CUR_LINE, lid)
            self._log.append((key, _U64.unpack_from(m, self._write_index)[0]))
        except Exception:
            pass  # e.g. the ring went away (the agent closed at exit)

    def _finish(self, a, fp):
        end = _U64.unpack_from(self._map, self._write_index)[0]
        log = self._log
        self._stop_tracing()
        records = a.ring.lane_records(self._lane, self._start_index, end)
        lost = (end - self._start_index) - len(records)
        stats = {}
        attribute(records, log, end, self._device, self._active0, self._reserved0, stats)
        for (code, lineno), s in stats.items():
            f = self.functions.get(code)
            if f is None:
                continue
            f.lines.setdefault(lineno, LineStats()).merge(s)
        self._outer.lost += lost
        changed = getattr(a, "lines_changed", None)
        if changed:
            try:
                changed()
            except Exception:
                pass

    # -- turning line events on and off ---------------------------------------------------------

    def _enable(self, code):
        mon = getattr(sys, "monitoring", None)
        if mon is not None:
            if self._mon is None:
                for tool in (4, 3, 5):
                    if mon.get_tool(tool) is None:
                        mon.use_tool_id(tool, "gpumem_agent")
                        mon.register_callback(tool, mon.events.LINE, self._on_line)
                        self._mon = tool
                        break
                else:
                    raise RuntimeError("gpumem_agent.profile: every sys.monitoring tool id is taken")
            mon.set_local_events(self._mon, code, mon.events.LINE)
            return
        # Older Pythons: a trace function, on this thread, that follows only the decorated code.
        if sys.gettrace() is not None and getattr(sys.gettrace(), "__self__", None) is not self:
            return  # a debugger or coverage owns tracing: leave it alone
        sys.settrace(self._global_trace)

    def _disable(self, code):
        mon = getattr(sys, "monitoring", None)
        if mon is not None and self._mon is not None:
            mon.set_local_events(self._mon, code, 0)
        elif getattr(sys.gettrace(), "__self__", None) is self:
            sys.settrace(None)

    def _global_trace(self, frame, event, arg):
        if event == "call" and frame.f_code in self._codes:
            return self._local_trace
        return None

    def _local_trace(self, frame, event, arg):
        if event == "line":
            self._on_line(frame.f_code, frame.f_lineno)
        return self._local_trace

    # -- results ---------------------------------------------------------------------------------

    def stats(self):
        return [f.as_dict() for f in self.functions.values() if f.calls]

    def format(self, code=None):
        """The table of every profiled function (or of the one with `code`), memlab's layout."""
        return "".join(_format_function(f) for c, f in self.functions.items() if f.profiled_calls and (code is None or c is code))

    def run_code(self, code, globals_, locals_=None, name=None):
        """exec(code) with its lines profiled (the %%gpumem magic): module-level code like a function."""
        fp = self.functions.setdefault(code, FunctionProfile(code, name or code.co_filename))
        fp.calls += 1
        return self._call(fp, exec, (code, globals_, globals_ if locals_ is None else locals_), {})

    def _at_exit(self):
        # At exit: whatever fails is said in one line, never a traceback over the program's last
        # lines, never a change to its exit status, never a wait (paths.publish opens nothing
        # planted: a FIFO at the path cannot hold the exit).
        try:
            if self._printed or not any(f.profiled_calls for f in self.functions.values()):
                return
            self._printed = True
            path = trust.environ().get("GPUMEM_PROFILE_JSON")
            if path:
                self._write_json(path)
            if trust.environ().get("GPUMEM_PROFILE_QUIET") != "1":
                sys.stderr.write(self.format())
        except Exception:
            pass  # stderr closed: nowhere left to say it

    def _write_json(self, path):
        """GPUMEM_PROFILE_JSON, written as the monitor writes --output: 0600, created exclusively
        beside `path` and renamed onto it only over nothing or a regular file of ours."""
        try:
            paths.publish(path, lambda f: f.write(json.dumps(self.stats(), indent=1).encode()))
        except paths.UnsafeFile as e:
            self._say(self._json_refusal(path, e))
        except Exception as e:
            self._say("could not write GPUMEM_PROFILE_JSON=%s: %s: %s" % (path, type(e).__name__, e))


def _format_function(f):
    code = f.code
    lines, first = _source(code)
    out = ["## %s  (%s:%d; %d calls, %d profiled%s)\n\n" % (
        f.name, code.co_filename, code.co_firstlineno, f.calls, f.profiled_calls,
        ", %d records lost: figures partial" % f.lost if f.lost else "")]
    row = "%6s %13s %14s %12s %12s %7s  %s\n"
    out.append(row % ("line", "peak active", "peak reserved", "allocated", "freed", "hits", "code"))
    out.append(row % ("-" * 6, "-" * 13, "-" * 14, "-" * 12, "-" * 12, "-" * 7, "-" * 4))
    for i, text in enumerate(lines):
        n = first + i
        s = f.lines.get(n)
        if s is None:
            out.append(row % (n, "", "", "", "", "", text.rstrip()))
        else:
            out.append(row % (n, _fmt(s.peak_active), _fmt(s.peak_reserved), _fmt(s.alloc_bytes), _fmt(s.freed_bytes), s.hits, text.rstrip()))
    out.append("\n")
    return "".join(out)


def _source(code):
    """The function's source lines and the number of the first (a whole cell for the magics)."""
    import inspect

    if code.co_filename.startswith("<gpumem-"):
        return linecache.getlines(code.co_filename), 1
    try:
        lines, first = inspect.getsourcelines(code)
        return lines, first
    except (OSError, TypeError):
        return [], code.co_firstlineno
