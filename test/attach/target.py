"""A program to attach to (test/attach/*.test.ts): does deterministic work in one of several shapes,
prints its checksum and exits with a chosen status, so that an attach that changed anything shows.
  target.py MODE CODE [STOPFILE]   MODE: busy STOPFILE | sleep STOPFILE | cbusy | threads | io | exit | serve STOPFILE
Where a STOPFILE is named, the program keeps at its shape until that file is there (at once for the
program left alone), then does its fixed work: what it prints does not depend on how long it waited.
Says `ready {"tids": …}` on stderr once the shape is in place."""
import ctypes
import hashlib
import json
import os
import sys
import threading
import time

mode, code = sys.argv[1], int(sys.argv[2])
tids = {}


def ready():
    sys.stderr.write("ready %s\n" % json.dumps(tids))
    sys.stderr.flush()


def busy(n):
    h = 0
    for i in range(n):
        h = (h * 31 + i) % 1000000007
    return h


def until_file(stop, work, seconds):
    # `work` over and over until the test makes `stop`; no longer than `seconds` should it never
    # (a test that failed before making it leaves no process behind).
    deadline = time.monotonic() + seconds
    while not os.path.exists(stop):
        if time.monotonic() > deadline:
            raise SystemExit("target.py: %s never appeared" % stop)
        work()


def busy_until(stop):
    # Python code running on the main thread (safe points all along) for as long as the test needs.
    # The file is looked for between stretches of tens of ms: a thread that gave the GIL up for a
    # stat() every few ms would take it straight back each time, and the agent's thread, waiting for
    # it, would starve (seconds).
    until_file(stop, lambda: busy(250_000), 60)


if mode == "busy":
    ready()
    busy_until(sys.argv[3])
    out = busy(2_000_000)
elif mode == "sleep":
    # The main thread asleep: the bootstrap runs when it wakes, the work after it goes on attached.
    ready()
    time.sleep(1.0)
    busy_until(sys.argv[3])
    out = (hashlib.sha256(b"slept").hexdigest()[:16], busy(1_000_000))
elif mode == "cbusy":
    # sum() over a range runs in C with the GIL held and no safe point until it ends.
    ready()
    out = sum(range(120_000_000))
elif mode == "threads":
    res = {}

    def work(k):
        res[k] = busy(1_500_000) if k % 2 else (time.sleep(1.2) or k)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    ready()
    while any(t.is_alive() for t in ts):
        time.sleep(0.01)
    out = sorted(res.items())
elif mode == "io":
    # Blocking calls through ctypes, which (unlike Python's own) do not retry on EINTR: a call made
    # in these threads must leave their syscalls to restart exactly as the kernel would have.
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    res = {}

    class Timespec(ctypes.Structure):
        _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]

    def reader():
        tids["read"] = threading.get_native_id()
        buf = ctypes.create_string_buffer(8)
        n = libc.read(r, buf, 8)
        res["read"] = (n, ctypes.get_errno(), buf.raw[: max(n, 0)].decode())

    def sleeper():
        tids["sleep"] = threading.get_native_id()
        t0 = time.monotonic()
        n = libc.nanosleep(ctypes.byref(Timespec(1, 500_000_000)), None)
        res["sleep"] = (n, ctypes.get_errno(), time.monotonic() - t0 >= 1.49)

    ts = [threading.Thread(target=reader), threading.Thread(target=sleeper)]
    for t in ts:
        t.start()
    while len(tids) < 2:
        time.sleep(0.01)
    time.sleep(0.2)  # both in their syscalls
    ready()
    for _ in range(200):
        time.sleep(0.01)
    os.write(w, b"hello")
    for t in ts:
        t.join()
    out = sorted(res.items())
elif mode == "exit":
    ready()
    time.sleep(0.05)
    out = "bye"
elif mode == "serve":
    ready()
    until_file(sys.argv[3], lambda: (busy(1000), time.sleep(0.002)), 180)
    out = "served"
else:
    raise SystemExit("unknown mode " + mode)
print("checksum %s" % (out,))
sys.stdout.flush()
sys.exit(code)
