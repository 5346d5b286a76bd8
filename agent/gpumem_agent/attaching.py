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
(seed.py), so the monitor's block detail is whole from the attach on.
"""
import json
import os
import stat
import sys
import threading
import time

from . import commands, paths, trust
from .seed import SeedError, take_seed
from .agent import Agent, _log

TOKEN_MAX_AGE = 60.0  # seconds: an older token is one the monitor stopped waiting for
ERROR_SUFFIX = ".error"
MAX_TOKEN_BYTES = 4096
MONITOR_POLL = 1.0  # seconds between checks that the monitor that attached still runs



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
        if self.seed_path and trust.environ().get("GPUMEM_TUI_KEEP") != "1":
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
            self.ring.finish()
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

    refused = trust.refusal()
    if refused:
        write_error(token, refused)
        return None
    if trust.environ().get("GPUMEM_TUI_DISABLE") == "1":
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
