"""The agent inside a training process: its files, the hook or the polling fallback, phases,
names, the OOM observer and the control socket. See docs/protocol.md.

Nothing here runs per allocator event. The agent starts when CUDA initializes (or at once, if it
already has), so that processes that never touch the GPU (data-loader workers) leave no trace.
"""
import atexit
import ctypes
import json
import os
import pickle
import sys
import threading
import time

from . import build, commands, identity, inputs, libraries, marks, paths, ring, stacks, tensor_names, trust, wire
from .stats import SETTLE_TRIES, device_stats, settle_totals, totals_from_stats
from .control import ControlServer
from .guard import Guard
from .phases import Phases

SYNC_SECONDS = 0.25


def _log(msg):
    if trust.environ().get("GPUMEM_TUI_VERBOSE") == "1":
        sys.stderr.write("gpumem-agent: %s\n" % msg)


def _env_int(*names):
    """The first of `names` set to an integer (torchrun's names first, then Open MPI's and Slurm's)."""
    for name in names:
        v = trust.environ().get(name)
        try:
            if v is not None:
                return int(v)
        except ValueError:
            pass
    return None


MIN_CAPACITY, MAX_CAPACITY = ring.MIN_CAPACITY, ring.MAX_CAPACITY


def ring_capacity(env):
    """GPUMEM_TUI_RING_CAPACITY, or the default. A value that is not a power of two in range is
    said on stderr (the user set it on purpose) and the default is used: monitoring still starts."""
    v = env.get("GPUMEM_TUI_RING_CAPACITY")
    if v is None:
        return ring.DEFAULT_CAPACITY
    try:
        n = int(v)
    except ValueError:
        n = 0
    if MIN_CAPACITY <= n <= MAX_CAPACITY and not n & (n - 1):
        return n
    sys.stderr.write("gpumem-agent: GPUMEM_TUI_RING_CAPACITY=%s is not a power of two from %d to %d records; using %d\n"
                     % (v, MIN_CAPACITY, MAX_CAPACITY, ring.DEFAULT_CAPACITY))
    return ring.DEFAULT_CAPACITY


def job_id(env=None):
    """What the ranks of one job share and another job's do not: torchrun's run id (unless the
    default "none"), else the rendezvous address, else Slurm's job id; None where nothing says."""
    env = trust.environ() if env is None else env
    run = env.get("TORCHELASTIC_RUN_ID")
    if run and run != "none":
        return "torchelastic:" + run
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return "%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"])
    if env.get("SLURM_JOB_ID"):
        return "slurm:" + env["SLURM_JOB_ID"] + ("." + env["SLURM_STEP_ID"] if env.get("SLURM_STEP_ID") else "")
    return None


def _hook_features(hook):
    """gpumem_hook_features() of the loaded hook: 0 where it has none (an older build)."""
    try:
        fn = hook.gpumem_hook_features
    except AttributeError:
        return 0
    fn.restype = ctypes.c_uint32
    return int(fn())


class Agent:
    def __init__(self, torch, directory=None):
        self.torch = torch
        self.pid = os.getpid()
        self.dir = directory or paths.agent_dir(trust.environ())
        self.ring = None
        self.hook = None
        self.hook_error = None
        self.mode = "none"
        self.unsettled = set()  # devices whose SETTLED figures await settle_totals (hook mode)
        self.server = None
        self.phases = None
        self.started = False
        self.active = True
        self.oom_snapshot = None
        # Whether the `history` verb turned torch's memory history on: a snapshot without it has
        # segments but no trace, so the monitor writes the one snapshot from its own events instead.
        self.history_on = False
        self.range_count = 0
        self.features = 0  # what the hook records beyond the events (wire.FEATURE_*)
        self.stacks = None  # the Python stacks of allocations, sampled by bytes (stacks.py)
        self.marks = None  # the sync points at every hook, where asked (marks.py)
        self.libraries = None  # the library marks: NCCL, CUDA graphs (libraries.py)
        self.inputs = None  # each step's input shape and the allocator's limit (inputs.py)
        # What this process runs without, and why, in words ({feature: sentence}): a feature that
        # failed turned itself off, a ring that did not fit was made smaller, a squatted directory
        # was replaced. In the manifest, and on the monitor's screens.
        self.notes = {}
        # Every callback the agent puts into the program reports its failures here: the feature
        # goes off, the notes say so once, the program never sees the exception (guard.py).
        self.guard = Guard(self.notes, step=lambda: self.phases.step if self.phases else None, changed=self.write_manifest)
        self.lock = threading.Lock()
        self._manifest_lock = threading.Lock()  # the training, sync and control threads all rewrite it
        self._built = None
        # Build (or find in the cache) the hook now, off the main thread: by the time CUDA
        # initializes it is usually ready.
        self._builder = threading.Thread(target=self._build, name="gpumem-agent-build", daemon=True)
        self._builder.start()

    # -- start-up -------------------------------------------------------------------------------

    def _build(self):
        if trust.environ().get("GPUMEM_TUI_POLLING") == "1":
            self._built = (None, "the hook is turned off (GPUMEM_TUI_POLLING=1)")
            return
        try:
            self._built = (build.hook_library(self.torch, log=_log), None)
        except Exception as e:  # a failed build is a mode, not an error of the program
            self._built = (None, str(e))

    def start(self):
        """Create the files and begin: called once CUDA is initialized. Never raises."""
        with self.lock:
            if self.started:
                return
            self.started = True
        try:
            self._start()
        except Exception as e:
            _log("not attached: %s: %s" % (type(e).__name__, e))
            self.active = False

    def _start(self):
        torch = self.torch
        # A squatted name gives a private sibling that the monitor also finds (paths.py).
        self.dir, note = paths.open_agent_dir(self.dir)
        if note:
            self.notes["directory"] = note
        n = max(1, torch.cuda.device_count())
        self.ring_path = os.path.join(self.dir, "%d.ring" % self.pid)
        self.sock_path = os.path.join(self.dir, "%d.sock" % self.pid)
        self.manifest_path = os.path.join(self.dir, "%d.json" % self.pid)
        capacity = ring_capacity(trust.environ())
        # Every page backed, sized to the free space: smaller, or totals only, where it must (ring.py).
        self.ring, note = ring.create_backed(self.ring_path, capacity, n, ranks=_env_int("LOCAL_WORLD_SIZE") or 1)
        if note:
            self.notes["ring"] = note
        self.n_devices = min(n, wire.MAX_DEVICES)
        self.sync()  # seed the totals from the allocator's statistics
        self._builder.join()
        lib, err = self._built
        if self.ring.header_only:
            lib, err = None, self.notes["ring"]  # no record space: the hook has nowhere to write
        if lib:
            try:
                self.hook = build.load_checked(lib)  # ours alone, checked on the file it loads
                self.hook.gpumem_hook_attach.argtypes = [ctypes.c_char_p, ctypes.c_int]
                self.hook.gpumem_hook_mark.argtypes = [ctypes.c_uint8, ctypes.c_uint8, ctypes.c_uint32]
                self.hook.gpumem_hook_range_name.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int]
                self.hook.gpumem_hook_range_count.restype = ctypes.c_uint32
                ticks, ns, ratio = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_double()
                self.hook.gpumem_hook_calibrate(20, ctypes.byref(ticks), ctypes.byref(ns), ctypes.byref(ratio))
                self.ring.set_calibration(ticks.value, ns.value, ratio.value)
                # GPUMEM_TUI_HOOK: "exact" copies the allocator's stats at every event; "empty"
                # registers a tracker that does nothing (benchmarks: torch's own cost of one).
                tracker = wire.TRACKER.get(trust.environ().get("GPUMEM_TUI_HOOK", ""), wire.TRACKER["events"])
                rc = self.hook.gpumem_hook_attach(self.ring_path.encode(), tracker)
                if rc != 0:
                    raise OSError(-rc, "attaching the hook: %s" % os.strerror(-rc))
                self.mode = "hook"
                self.features = _hook_features(self.hook)
            except Exception as e:
                self.hook = None
                err = "%s: %s" % (type(e).__name__, e)
        if not self.hook:
            self.hook_error = err
            self.mode = "polling"
            self.ring.set("<I", "mode", wire.MODE["polling"])
        else:
            # The copy above came before the hook counted: settled now, before the monitor can
            # find this agent (the manifest comes later); a failure is the sync loop's.
            self.unsettled = set(range(self.n_devices))
            self.guard.call("sync", self.settle, SETTLE_TRIES)
            # A failure here turns stacks off, never the hook, which torch already calls.
            self.stacks = self.guard.call("stacks", stacks.start, self.hook, self.features, trust.environ(), self.notes)
            if self.stacks:
                self.guard.stops("stacks", lambda: self.hook and stacks.set_stacks(self.hook, 0, 0))
        self.phases = Phases(self._mark, self.guard)
        self.phases.install(torch)
        # Each step's input shape and the allocator's limit, for the batch forecast (inputs.py).
        self.inputs = self.guard.call(inputs.FEATURE, inputs.start, torch, self.hook, self.features, self.notes, self.guard, marks._compiling(torch))
        if self.inputs is not None:
            self.phases.on_input = self.inputs.at_forward
        # GPUMEM_TUI_MARKS=hooks: a sync point at every hook (marks.py); after the phases' hooks,
        # so a point is stamped with the phase its hook began.
        self.marks = self.guard.call(marks.FEATURE, marks.start, torch, self.hook, self.features, trust.environ(), self.notes, self.guard)
        # NCCL's communicators and CUDA graphs' instantiation marked (libraries.py): the ledger of
        # memory outside PyTorch gives each NVML jump to its cause. Only where the hook records ranges.
        if self.hook:
            self.libraries = self.guard.call(libraries.FEATURE, libraries.start, torch, self.notes, self.guard)
        self.server = ControlServer(self.sock_path, self.handlers(), on_error=lambda e: self.guard.fail("control", e)).start()
        self.guard.stops("control", self.server.stop)
        self._attach_oom_observer()
        self.write_manifest()
        threading.Thread(target=self._sync_loop, name="gpumem-agent-sync", daemon=True).start()
        atexit.register(self.guard.call, "close", self.close)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: self.guard.call("fork", self._forked))

    def _forked(self):
        # A forked child shares the parent's mapping but must never write it or remove its files.
        self.active = False
        self.hook = None
        self.server = None

    # -- state ----------------------------------------------------------------------------------

    def _mark(self, action, phase, step):
        if not self.active:
            return
        if self.hook:
            self.hook.gpumem_hook_mark(action, phase, step)
        else:
            self.ring.set("<I", "cur_step", step)
            self.ring.set("<B", "cur_phase", phase)

    def sync(self):
        """Copy the allocator's own statistics into the header (see totals_from_stats)."""
        torch = self.torch
        for d in range(self.n_devices if self.ring else 0):
            s = device_stats(torch, d)
            if s:
                self.ring.set_totals(d, **totals_from_stats(s, self.mode))
        if self.ring:
            self.ring.set("<Q", "updated_ns", time.time_ns())

    def settle(self, tries=1):
        """settle_totals for each device not settled yet, `tries` times at most each."""
        for d in sorted(self.unsettled):
            for _ in range(tries):
                if settle_totals(self.ring, d, lambda dev: device_stats(self.torch, dev)):
                    self.unsettled.discard(d)
                    break
        if self.unsettled:
            _log("totals not settled yet on devices %s (allocator busy): trying again" % sorted(self.unsettled))

    def _sync_loop(self):
        while self.active and self.ring and self.guard.on("sync"):
            time.sleep(SYNC_SECONDS)
            try:
                if self.hook and self.unsettled:
                    self.settle()
                self.sync()
                if self.hook:
                    n = self.hook.gpumem_hook_range_count()
                    st = self.stacks
                    new_stacks = st is not None and self.guard.call("stacks", st.read_new)
                    if n != self.range_count or (st is not None and st.due(new_stacks, time.monotonic())):
                        self.range_count = n
                        t = time.monotonic()
                        self.write_manifest()
                        if st is not None:  # new stacks' rewrites spaced by what this one took (stacks.py)
                            st.written(t, time.monotonic() - t)
            except Exception as e:
                if self.active:  # at exit the ring closes under this thread: not a failure
                    self.guard.fail("sync", e)

    def ranges(self):
        out = {}
        if not self.hook:
            return out
        buf = ctypes.create_string_buffer(1024)
        for i in range(1, self.hook.gpumem_hook_range_count() + 1):
            if self.hook.gpumem_hook_range_name(i, buf, len(buf)) == 0:
                out[str(i)] = buf.value.decode(errors="replace")
        return out

    def manifest(self):
        return {
            "version": 1,
            "pid": self.pid,
            "cmdline": list(sys.argv if sys.argv and sys.argv[0] else ["python"]),
            "rank": _env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"),
            "local_rank": _env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"),
            "world_size": _env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
            # The ranks on this node: torchrun gives each node a block of local_world_size ranks,
            # node number group_rank; the monitor then tells a missing rank from one on another node.
            "local_world_size": _env_int("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
            "group_rank": _env_int("GROUP_RANK", "SLURM_NODEID"),
            "job": job_id(),
            "devices": list(range(self.n_devices)),
            "device_uuids": identity.device_uuids(self.torch, range(self.n_devices)),
            "cuda_visible_devices": trust.environ().get("CUDA_VISIBLE_DEVICES"),
            "pid_namespace": identity.pid_namespace(),
            "host_pid": None,  # the monitor finds it (NSpid of the pids NVML lists)
            "torch_version": self.torch.__version__,
            "hook_mode": self.mode,
            "hook_error": self.hook_error,
            "segment_pools": bool(self.features & wire.FEATURE_SEGMENT_POOLS),
            # How the allocator rounds and splits blocks: the monitor follows it to give each block
            # torch's size (torch reads the newer name first).
            "alloc_conf": trust.environ().get("PYTORCH_ALLOC_CONF") or trust.environ().get("PYTORCH_CUDA_ALLOC_CONF"),
            **((self.stacks and self.guard.call("stacks", self.stacks.manifest)) or stacks.manifest_off()),
            "ring": self.ring_path,
            "socket": self.sock_path,
            "ranges": self.ranges(),
            "lines": self._line_names(),
            "oom_snapshot": self.oom_snapshot,
            "notes": dict(self.notes),
            "nvml_used_bytes": None,
            "started_unix_ns": self.ring.get("<Q", "attach_ns"),
        }

    def _line_names(self):
        from . import line_names

        return line_names()

    def lines_changed(self):
        """The line profiler met new lines: the monitor reads their names from the manifest."""
        n = len(self._line_names())
        if n != getattr(self, "_lines_written", 0):
            self._lines_written = n
            self.write_manifest()

    def write_manifest(self):
        # `active` is read under the lock: close() holds it while it writes the final manifest and
        # turns `active` off, so no other thread's write can replace the final one afterwards.
        with self._manifest_lock:
            if self.active:
                paths.write_private(self.manifest_path, json.dumps(self.manifest()).encode())

    # -- OOM ------------------------------------------------------------------------------------

    def _attach_oom_observer(self):
        observer = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if observer is None:
            return

        def on_oom(device, alloc, device_allocated, device_free):
            # Called by the allocator, in the program's failing allocation: the program's OOM
            # error is what it gets, never ours.
            if self.oom_snapshot or not self.active or not self.guard.on("oom"):
                return
            try:
                self.oom_snapshot = self._dump("oom")
                self.write_manifest()
            except Exception as e:
                self.guard.fail("oom", e)

        observer(on_oom)

    def _dump(self, tag, path=None):
        if path is None:
            path = os.path.join(self.dir, "%d-%s-%d.pickle" % (self.pid, tag, time.time_ns() // 1000000))
        # What torch's _dump_snapshot does (pickle the _snapshot() dict), but into a file created
        # exclusively, 0600, under an unpredictable name: the directory may be shared, and a link
        # planted at a name torch would open is never followed (paths.publish).
        snapshot = self.torch.cuda.memory._snapshot()
        return paths.publish(path, lambda f: pickle.dump(snapshot, f))

    # -- commands -------------------------------------------------------------------------------

    def handlers(self):
        """The control socket's verbs (commands.py), each checked against the protocol."""
        return commands.handlers(commands.Commands(self))

    # -- exit -----------------------------------------------------------------------------------

    def close(self):
        """At exit: exact final totals, then the files go. They stay where GPUMEM_TUI_KEEP=1, or
        where the monitor that started this program (`run` sets GPUMEM_TUI_MONITOR_PID) still runs:
        then the manifest is written a last time, after the hook is detached, with every range and
        line it named and the tensors' names at exit (`final_names`), and that monitor reads the
        files for its last document and removes them (docs/protocol.md, "The end of a run"): a run
        shorter than the monitor's tick or the agent's sync loop ends named. Never raises; the
        names walk is the `names` verb's (models and optimizers, no scan of every object)."""
        if not self.active or os.getpid() != self.pid:
            return
        try:
            self.torch.cuda.synchronize()
            self.sync()
        except Exception:
            pass
        keep = trust.environ().get("GPUMEM_TUI_KEEP") == "1"
        if not keep:
            try:
                monitor = int(trust.environ().get("GPUMEM_TUI_MONITOR_PID") or 0)
                if monitor > 0:
                    os.kill(monitor, 0)  # it runs, and is ours (another user's answers EPERM)
                    keep = True
            except (ValueError, OSError):
                pass  # gone, or never there: nobody would remove the files
        final_names = None
        guard = getattr(self, "guard", None)
        if keep and (guard is None or guard.on("names")):  # not where a names walk failed before
            try:
                t0 = time.perf_counter()
                ph = self.phases
                tensors = list(tensor_names.known_names(ph.models, ph.optimizers).values()) if ph else []
                # Taken before the hook's last records: the monitor applies them at this point of
                # the stream, as it applies a `names` reply.
                final_names = {"tensors": tensors, "write_index": self.ring.written(), "step": ph.step if ph else 0,
                               "scan_ms": round((time.perf_counter() - t0) * 1000, 3)}
            except Exception as e:
                _log("names at exit: %s: %s" % (type(e).__name__, e))
        self.active = False
        try:
            if self.server:
                self.server.stop()
            if self.hook:
                self.hook.gpumem_hook_detach()
        except Exception as e:
            _log("close: %s: %s" % (type(e).__name__, e))
        if keep:
            try:
                # Held to the end (at exit only daemon threads are left to wait on it): a rewrite
                # of another thread that saw the agent active a moment ago never lands after this one.
                lock = getattr(self, "_manifest_lock", None)
                if lock is not None:
                    lock.acquire(timeout=1.0)
                m = self.manifest()  # the hook keeps its range names after detach: every one
                m["final_names"] = final_names
                paths.write_private(self.manifest_path, json.dumps(m).encode())
            except Exception as e:
                _log("final manifest: %s: %s" % (type(e).__name__, e))
        if self.ring:
            self.ring.finish()
        if not keep:
            for p in (self.ring_path, self.manifest_path):
                try:
                    os.unlink(p)
                except OSError:
                    pass
