"""The agent started inside a program that is already running (`gpumem-tui attach PID`;
docs/protocol.md, "Attaching to a running process").

The monitor's injector runs a bootstrap in the target at a safe point of the interpreter; the
bootstrap starts a daemon thread that calls attach_running(token). Everything slow happens on that
thread: the hook's build (on the Agent's own builder thread, joined here), the seed, the files. The
training thread never waits for any of it.

The token is a file the monitor created for this one attach (0600, ours, fresh). The bootstrap
claims it by removing it before it calls attach_running (a monitor that gave up removed it first,
and then nothing happens); a caller that finds it still there checks it the same way here (ours,
0600, a regular file, fresh) and claims it. A refusal goes to `<token>.error` (one line, created
exclusively, 0600), where the monitor reads why; success is the agent's manifest.

The seed: what the allocator held before the hook's first record, tied to a point of the stream
(see seed_device), so the monitor's block detail is whole from the attach on.
"""
import json
import os
import stat
import sys
import threading
import time

from . import commands, paths, wire
from .agent import Agent, _log

TOKEN_MAX_AGE = 60.0  # seconds: an older token is one the monitor stopped waiting for
ERROR_SUFFIX = ".error"
MAX_TOKEN_BYTES = 4096
SEED_TRIES = 8  # snapshots taken at most, where events race one in a way no split explains
MAX_WINDOW = 1 << 14  # records written during one snapshot beyond which it is taken again
MONITOR_POLL = 1.0  # seconds between checks that the monitor that attached still runs

ALLOC, FREE_REQUESTED, FREE_COMPLETED = wire.ACTION["alloc"], wire.ACTION["free_requested"], wire.ACTION["free_completed"]
SEGMENT_ALLOC, SEGMENT_FREE = wire.ACTION["segment_alloc"], wire.ACTION["segment_free"]
SEGMENT_MAP, SEGMENT_UNMAP = wire.ACTION["segment_map"], wire.ACTION["segment_unmap"]
# The events the hook counts (n_alloc + n_free) and the monitor's model counts alike: a seed is
# tied to "right after the k-th of them" on its device.
COUNTED = (ALLOC, FREE_REQUESTED)
ALLOCATOR = (ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP)
F_ADDRESS, F_SIZE, F_STREAM = wire.RECORD_FIELDS.index("address"), wire.RECORD_FIELDS.index("size"), wire.RECORD_FIELDS.index("stream")
F_ACTION, F_DEVICE = wire.RECORD_FIELDS.index("action"), wire.RECORD_FIELDS.index("device")
SEED_BLOCK_STATES = ("active_allocated", "active_pending_free")  # inactive blocks are free space: left out


# -- the token and the result --------------------------------------------------------------------


def check_token(path, now=None, uid=None, max_age=TOKEN_MAX_AGE):
    """(options, None) for a token this attach may act on, else (None, why). lstat: a link is
    never followed; the file must be a regular file of ours, 0600, written within max_age seconds.
    Its content: a JSON object of options (`monitor_pid`, `monitor_start`, `directory`), or
    anything else (the monitor's secret and deadline, checked by the bootstrap): no options."""
    uid = os.getuid() if uid is None else uid
    now = time.time() if now is None else now
    if not isinstance(path, str) or not os.path.isabs(path):
        return None, "the token must be an absolute path"
    try:
        st = os.lstat(path)
    except OSError as e:
        return None, "no token at %s (%s)" % (path, e.strerror)
    if not stat.S_ISREG(st.st_mode):
        return None, "the token %s is not a regular file" % path
    if st.st_uid != uid:
        return None, "the token %s belongs to uid %d, not to this process's (%d)" % (path, st.st_uid, uid)
    if stat.S_IMODE(st.st_mode) != 0o600:
        return None, "the token %s has mode %o, not 600" % (path, stat.S_IMODE(st.st_mode))
    if not now - max_age <= st.st_mtime <= now + 5:
        return None, "the token %s is stale (written %.0f s ago)" % (path, now - st.st_mtime)
    if st.st_size > MAX_TOKEN_BYTES:
        return None, "the token %s is larger than %d bytes" % (path, MAX_TOKEN_BYTES)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        try:
            text = os.read(fd, MAX_TOKEN_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as e:
        return None, "the token %s cannot be read (%s)" % (path, e.strerror)
    try:
        options = json.loads(text) if text.strip().startswith(b"{") else {}
    except ValueError as e:
        return None, "the token %s is not valid JSON (%s)" % (path, e)
    return options if isinstance(options, dict) else {}, None


def write_error(token, why):
    """`<token>.error`: why the attach was refused, one line, created exclusively (never through a
    link), 0600; the monitor reads it and removes it. Returns its path, or None where it cannot be
    written (the monitor then times out waiting for the manifest, and says so)."""
    path = token + ERROR_SUFFIX
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as e:
        _log("attach error file %s: %s" % (path, e))
        return None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write((" ".join(str(why).split()) + "\n").encode())
    except OSError as e:
        _log("attach error file %s: %s" % (path, e))
        return None
    return path


def _process_start(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks): a pid reused by another process
    has another; None where unreadable."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def monitor_alive(pid, start):
    """The monitor that attached still runs: the same pid, started at the same time."""
    if not isinstance(pid, int) or pid <= 0:
        return True  # no monitor named: nothing to watch (the process's exit cleans up)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process has the pid now, or a container hides it: compare start times
    return start is None or _process_start(pid) in (None, start)


# -- the seed: the allocator's state at a point of the stream -----------------------------------


class SeedError(Exception):
    pass


def _allocated_addresses(segments):
    return {b["address"] for seg in segments for b in seg.get("blocks", ()) if b.get("state") == "active_allocated"}


def split_point(window, segments):
    """The snapshot `segments` (one device's, torch.cuda.memory_snapshot()) was taken at some point
    of `window`, the device's allocator records (action, address) written while it was taken: the
    allocator's lock orders the snapshot among them, so exactly one split p (records [0, p) before
    it, [p, n) after) produced what it shows. The smallest p that agrees with the snapshot on every
    address the window touches (a block allocated or not, a segment there or not), or None where
    none does. Splits that agree alike leave the same blocks once the rest is applied: the first
    is as good as any."""
    allocated = _allocated_addresses(segments)
    seg_addresses = {seg["address"] for seg in segments}
    # Per address: its state in the snapshot, and what the records say it was before the window
    # (the opposite of the first record touching it: an alloc finds it free).
    truth, state = {}, {}
    keyed = []
    for action, address in window:
        if action in (ALLOC, FREE_REQUESTED):
            key, now = ("b", address), action == ALLOC
            truth.setdefault(key, address in allocated)
        elif action in (SEGMENT_ALLOC, SEGMENT_FREE):
            key, now = ("s", address), action == SEGMENT_ALLOC
            truth.setdefault(key, address in seg_addresses)
        else:
            keyed.append(None)
            continue
        state.setdefault(key, not now)
        keyed.append((key, now))
    wrong = sum(1 for k, v in state.items() if v != truth[k])
    if wrong == 0:
        return 0
    for i, kn in enumerate(keyed):
        if kn is None:
            continue
        key, now = kn
        if state[key] != now:
            wrong += -1 if state[key] != truth[key] else 1
            state[key] = now
        if wrong == 0:
            return i + 1
    return None


def _seed_segment(seg):
    """The parts of a snapshot segment the monitor reads (frames and the rest left out: bounded)."""
    blocks = [{"address": int(b["address"]), "size": int(b["size"]), "requested_size": int(b.get("requested_size", b["size"])), "state": b["state"]}
              for b in seg.get("blocks", ()) if b.get("state") in SEED_BLOCK_STATES]
    return {"address": int(seg["address"]), "total_size": int(seg["total_size"]), "stream": int(seg.get("stream", 0)),
            "is_expandable": bool(seg.get("is_expandable", False)), "blocks": blocks}


def seed_device(device, records, wb, wa, segments):
    """One device's seed: {"device", "events", "segments"}. `records`: the device's lane records
    (tuples as ring.lane_records gives them) of indices [0, wa), every one present; [wb, wa) were
    written while the snapshot `segments` was taken. The state is taken back to just after the last
    counted event (alloc or free_requested) before the snapshot's point, undoing the segment
    records between: the monitor's model applies the seed right after its `events`-th counted
    event of this device, and every record after that point comes after the seed."""
    if len(records) != wa:
        raise SeedError("the ring no longer holds the records since the attach (%d of %d)" % (len(records), wa))
    mine = [r[F_DEVICE] == device and r[F_ACTION] in ALLOCATOR for r in records]
    window = [(r[F_ACTION], r[F_ADDRESS]) for r, m in zip(records[wb:wa], mine[wb:wa]) if m]
    rel = split_point(window, segments)
    if rel is None:
        raise SeedError("no point of the %d records written during the snapshot explains it" % len(window))
    # back to an absolute lane index: the rel-th of this device's window records
    p, seen = wb, 0
    while seen < rel:
        seen += mine[p]
        p += 1
    q = p
    while q > 0 and not (mine[q - 1] and records[q - 1][F_ACTION] in COUNTED):
        q -= 1
    segs = {seg["address"]: _seed_segment(seg) for seg in segments}
    for r in records[q:p]:
        if not (r[F_DEVICE] == device):
            continue
        a = r[F_ACTION]
        if a == SEGMENT_ALLOC:
            segs.pop(r[F_ADDRESS], None)
        elif a == SEGMENT_FREE:
            segs[r[F_ADDRESS]] = {"address": r[F_ADDRESS], "total_size": r[F_SIZE], "stream": r[F_STREAM], "is_expandable": False, "blocks": []}
        elif a in (SEGMENT_MAP, SEGMENT_UNMAP):
            raise SeedError("expandable segments mapped pages during the snapshot")
    events = sum(1 for r, m in zip(records[:q], mine[:q]) if m and r[F_ACTION] in COUNTED)
    return {"device": device, "events": events, "segments": [segs[a] for a in sorted(segs)]}


def take_seed(agent, snapshot=None):
    """The seed of every device, from torch.cuda.memory_snapshot() bracketed by the lanes' write
    indices. Taken again where a window is too long or unexplained; raises SeedError after
    SEED_TRIES."""
    ring = agent.ring
    snapshot = snapshot or agent.torch.cuda.memory_snapshot
    why = None
    for _ in range(SEED_TRIES):
        lanes = {d: ring.lane_of(d) for d in range(agent.n_devices)}
        wb = {d: ring.lane_written(lane) for d, lane in lanes.items()}
        write_index = ring.written()
        segments = snapshot()
        wa = {d: ring.lane_written(lane) for d, lane in lanes.items()}
        if any(wa[d] - wb[d] > MAX_WINDOW for d in lanes):
            why = "more than %d records written during the snapshot" % MAX_WINDOW
            continue
        try:
            devices = [seed_device(d, ring.lane_records(lanes[d], 0, wa[d]), wb[d], wa[d], [s for s in segments if s.get("device", 0) == d])
                       for d in lanes]
        except SeedError as e:
            why = str(e)
            continue
        return {"version": 1, "unix_ns": time.time_ns(), "write_index": write_index, "devices": devices}
    raise SeedError(why or "no snapshot could be tied to the stream")


# -- the agent that was attached -----------------------------------------------------------------


class AttachedAgent(Agent):
    """An Agent started in a running program: a seed in its first manifest, a `detach` verb, and
    its files gone when the monitor that attached it exits."""

    def __init__(self, torch, directory=None, monitor_pid=None, monitor_start=None):
        self.seed = None  # the manifest's `seed`: {"path", "bytes", "write_index"}
        self.seed_path = None
        self.attached_ns = time.time_ns()
        self.monitor_pid = monitor_pid
        self.monitor_start = monitor_start
        self.detached = False
        super().__init__(torch, directory)

    def _attach_oom_observer(self):
        # Called in _start once the hook runs and the phases are installed, just before the first
        # manifest: the seed goes in there, so the monitor reads no record before it knows it.
        if self.mode == "hook":
            try:
                self._write_seed()
            except Exception as e:  # no seed: detail is partial with its cause, as before
                self.notes["seed"] = "no seed: %s" % e
        super()._attach_oom_observer()

    def _write_seed(self):
        seed = take_seed(self)
        seed["step"] = self.phases.step if self.phases else 0
        data = json.dumps(seed).encode()
        self.seed_path = os.path.join(self.dir, "%d.seed.json" % self.pid)
        paths.write_private(self.seed_path, data)
        self.seed = {"path": self.seed_path, "bytes": len(data), "write_index": seed["write_index"]}

    def manifest(self):
        m = super().manifest()
        # Steps count from the attach: step 0 runs until the first optimizer step after it.
        m["attached"] = {"unix_ns": self.attached_ns, "step": 0}
        m["seed"] = self.seed
        return m

    def handlers(self):
        """An Agent's verbs and `detach` (commands.py)."""
        return commands.handlers(commands.AttachedCommands(self))

    def close(self):
        """At the program's exit: as an Agent's, and the seed goes with the other files."""
        if os.getpid() != self.pid:
            return  # a forked child: the files are the parent's
        super().close()
        if self.seed_path and os.environ.get("GPUMEM_TUI_KEEP") != "1":
            try:
                os.unlink(self.seed_path)
            except OSError:
                pass

    def start_watch(self):
        if isinstance(self.monitor_pid, int) and self.monitor_pid > 0:
            threading.Thread(target=self._watch, name="gpumem-agent-watch", daemon=True).start()

    def _watch(self):
        while self.active and not self.detached:
            time.sleep(MONITOR_POLL)
            if not monitor_alive(self.monitor_pid, self.monitor_start):
                _log("the monitor that attached (pid %d) is gone: detaching" % self.monitor_pid)
                self.detach()
                return

    def detach(self, delay=0.1):
        """Stop writing, remove every file and every hook torch lets us remove. Never raises.
        Left behind, each costing a flag check: the allocator's trace tracker (torch has no API to
        remove one: it finds no ring), the OOM observer (none either), and the optimizer step hooks
        until the training thread's next forward removes them (removing them here could change
        torch's hook dict while the training thread walks it in a step)."""
        global _attached
        with self.lock:
            if self.detached:
                return
            self.detached = True
        time.sleep(delay)  # the detach verb's reply goes out first
        self.active = False  # the sync loop, the OOM observer and marks stop here
        ph = self.phases
        if ph is not None:
            ph.on = False
            ph._remove_module_hooks()
            ph._unpatch()
            _remove_later(ph.opt_handles)
            ph.opt_handles = []
        try:
            if self.server:
                self.server.stop()
        except Exception:
            pass
        try:
            if self.hook:
                self.hook.gpumem_hook_detach()  # the range callback too; a later attach adds it again
        except Exception as e:
            _log("detach: %s: %s" % (type(e).__name__, e))
        self.hook = None
        try:
            import atexit

            atexit.unregister(self.guard.call)
        except Exception:
            pass
        if self.ring:
            try:
                self.ring.set("<B", "closed", 1)
                self.ring.close()
            except Exception:
                pass
        for p in (getattr(self, "ring_path", None), getattr(self, "manifest_path", None), self.seed_path):
            if p:
                try:
                    os.unlink(p)
                except OSError:
                    pass
        import gpumem_agent

        if gpumem_agent._agent is self:
            gpumem_agent._agent = None
        if _attached is self:
            _attached = None


def _remove_later(handles):
    """Remove optimizer hook handles on the training thread at its next module call (a global
    forward pre-hook that removes them and then itself): never while a step walks their dict."""
    if not handles:
        return
    try:
        from torch.nn.modules import module as nn_module
    except Exception:
        return
    box = {}

    def sweep(mod, args):
        try:
            for h in handles:
                h.remove()
            box["self"].remove()
        except Exception:
            pass

    box["self"] = nn_module.register_module_forward_pre_hook(sweep)


_attached = None
_attach_lock = threading.Lock()


def claim_token(token):
    """(options, None) where this call owns the attach, else (None, why). A token already gone was
    claimed by the bootstrap (which checked it); one still there is checked and claimed here."""
    if not isinstance(token, str) or not os.path.isabs(token):
        return None, "the token must be an absolute path"
    if not os.path.lexists(token):
        return {}, None
    options, why = check_token(token)
    if options is None:
        return None, why
    try:
        os.unlink(token)
    except OSError:
        return None, "the token %s was taken back by the monitor" % token
    return options, None


def attach_running(token, monitor_pid=None, monitor_start=None):
    """Start the agent in this running process, as `run` would have: called by the bootstrap on a
    thread of its own (this thread waits for the hook's build; the program's threads never do).
    `monitor_pid` (and its /proc start time, `monitor_start`): the monitor that owns this attach;
    when it exits, the agent detaches. None: the agent stays until `detach` or the program's exit.
    Returns the Agent, or None. Never raises."""
    try:
        options, why = claim_token(token)
        if options is None:
            _log("attach: %s" % why)
            return None  # the monitor gave up: nothing written
        if monitor_pid is not None:
            options = dict(options, monitor_pid=monitor_pid, monitor_start=monitor_start)
        with _attach_lock:
            return _attach(token, options)
    except Exception as e:  # the program runs on without us
        try:
            write_error(token, "%s: %s" % (type(e).__name__, e))
        except Exception:
            pass
        return None


def _refusal(torch_module, current):
    """Why this process cannot be attached now, or None."""
    if current is not None and getattr(current, "active", False):
        sock = getattr(current, "sock_path", None)
        return "an agent is already attached in this process" + (" (its socket: %s)" % sock if sock else "")
    if torch_module is None:
        return "torch is not imported in this process"
    cuda = getattr(torch_module, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return "CUDA is not initialized in this process yet"
    return None


def _attach(token, options):
    global _attached
    import gpumem_agent

    if os.environ.get("GPUMEM_TUI_DISABLE") == "1":
        write_error(token, "GPUMEM_TUI_DISABLE=1 is set in this process")
        return None
    why = _refusal(sys.modules.get("torch"), gpumem_agent._agent or _attached)
    if why:
        write_error(token, why)
        return None
    torch = sys.modules["torch"]
    directory = options.get("directory") if isinstance(options.get("directory"), str) else None
    pid, start = options.get("monitor_pid"), options.get("monitor_start")
    agent = AttachedAgent(torch, directory, monitor_pid=pid if isinstance(pid, int) else None, monitor_start=start if isinstance(start, int) else None)
    agent.start()  # joins the build on this thread; never raises
    if not agent.active or agent.ring is None:
        write_error(token, "the agent did not start (GPUMEM_TUI_VERBOSE=1 says why on stderr)")
        return None
    gpumem_agent._agent = agent
    _attached = agent
    agent.start_watch()
    return agent
