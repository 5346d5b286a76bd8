"""Test-only payload for `gpumem-tui attach` (GPUMEM_TUI_ATTACH_PAYLOAD): stands in for
gpumem_agent.attach_running where there is no torch. It records where the bootstrap ran, serves the
real control socket (gpumem_agent.control) with one verb, `detach`, and writes a manifest naming it,
so the monitor's attach/detach path runs whole; on detach it removes both and its thread ends."""
import json
import os
import sys
import threading
import time


def attach_running(token, monitor_pid=None, monitor_start=None):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "agent"))
    try:
        from gpumem_agent import control, paths
    finally:
        del sys.path[0]
    d = os.path.dirname(token)
    pid = os.getpid()
    boot = getattr(threading.current_thread(), "gpumem_boot", None)
    record = {"pid": pid, "boot": boot, "payload_thread": threading.get_ident(), "main": threading.main_thread().ident,
              "monitor_pid": monitor_pid, "monitor_start": monitor_start}
    with open(os.path.join(d, "probe-%d.jsonl" % pid), "a") as f:
        f.write(json.dumps(record) + "\n")
    done = threading.Event()
    sock = os.path.join(d, "%d.sock" % pid)
    manifest = os.path.join(d, "%d.json" % pid)

    def detach():
        done.set()
        return {"detaching": True, "note": "probe detached"}  # the protocol's detach reply (src/collect/protocol.ts)

    server = control.ControlServer(sock, {"detach": detach}).start()
    paths.write_private(manifest, json.dumps({"pid": pid, "socket": sock, "attached": {"step": 0}}).encode())
    done.wait()
    # After the reply went out: stop() closes every connection, the asking one too.
    time.sleep(0.05)
    server.stop()
    os.unlink(manifest)
    server.thread.join(5)  # its thread closes its selector on the way out
