"""The control socket: JSON lines over a Unix socket, one thread of the agent's own.

Pure standard library, so that its protocol and security checks are tested without torch. Every
line is bounded, every peer's uid is checked against ours, and whatever a client sends gets an
answer or a closed connection: never an exception into the training process, never a stall (the
socket is non-blocking; a command runs on this thread only for as long as it takes).
"""
import json
import os
import selectors
import socket
import struct
import threading

MAX_LINE = 64 * 1024
MAX_CLIENTS = 16


def parse_request(line):
    """(id, cmd, args) from one line, or raise ValueError with the reason in words."""
    if len(line) > MAX_LINE:
        raise ValueError("line longer than %d bytes" % MAX_LINE)
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError("not JSON: %s" % e)
    if not isinstance(msg, dict):
        raise ValueError("a request is a JSON object")
    cmd = msg.get("cmd")
    if not isinstance(cmd, str):
        raise ValueError('a request needs "cmd" (a string)')
    rid = msg.get("id")
    if rid is not None and not isinstance(rid, (int, str)):
        raise ValueError('"id" must be a number or a string')
    args = {k: v for k, v in msg.items() if k not in ("id", "cmd")}
    return rid, cmd, args


def handle_line(line, handlers):
    """The reply (a dict) to one request line."""
    rid = None
    try:
        rid, cmd, args = parse_request(line)
        fn = handlers.get(cmd)
        if fn is None:
            return {"id": rid, "ok": False, "error": "unknown command %r; known: %s" % (cmd, ", ".join(sorted(handlers)))}
        result = fn(**args)
        reply = {"id": rid, "ok": True}
        reply.update(result or {})
        return reply
    except TypeError as e:
        return {"id": rid, "ok": False, "error": "bad arguments: %s" % e}
    except Exception as e:  # a command's failure is the client's answer, not the process's problem
        return {"id": rid, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}


def peer_uid(conn):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class ControlServer:
    """Serves `handlers` ({verb: fn(**args) -> dict}) on a Unix socket at `path` (0600).
    `on_error(exc)`: the thread met what no request explains and ends (the agent's guard)."""

    def __init__(self, path, handlers, uid=None, on_error=None):
        self.path = path
        self.handlers = handlers
        self.on_error = on_error
        self.uid = os.getuid() if uid is None else uid
        self.sel = selectors.DefaultSelector()
        self.buffers = {}
        self.stopping = False
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.sock.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.sel.register(self.sock, selectors.EVENT_READ)
        # stop() wakes the serving thread through this pipe, so that a detach is not a select's
        # timeout long; the lock keeps stop() from writing to a descriptor number the thread has
        # closed already (and that the program may have opened again since).
        self._wake_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.sel.register(self._wake_r, selectors.EVENT_READ)
        self.thread = threading.Thread(target=self._run, name="gpumem-agent-control", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _close(self, conn):
        self.buffers.pop(conn, None)
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError, OSError):
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _send(self, conn, reply):
        try:
            data = (json.dumps(reply) + "\n").encode()
        except (TypeError, ValueError) as e:  # a handler's value JSON cannot carry: the client hears why
            data = (json.dumps({"id": reply.get("id"), "ok": False, "error": "the reply could not be written as JSON: %s" % e}) + "\n").encode()
        conn.setblocking(True)
        conn.settimeout(2.0)  # a client that does not read its answers is dropped, not waited for
        try:
            conn.sendall(data)
            conn.setblocking(False)
        except OSError:
            self._close(conn)

    def _run(self):
        try:
            self._serve()
        except Exception as e:  # never out of the thread: said once, through on_error
            if not self.stopping and self.on_error is not None:
                try:
                    self.on_error(e)
                except Exception:
                    pass
        finally:
            # The thread owns its selector while it runs (stop() may come from any thread, this one
            # too, while a select is under way): it closes it on its way out, so no epoll
            # descriptor outlives a stop (an attach and a detach leave none behind).
            self._close_selector()

    def _close_selector(self):
        try:
            self.sel.close()
        except (OSError, ValueError):
            pass
        with self._wake_lock:
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._wake_r = self._wake_w = -1

    def _serve(self):
        while not self.stopping:
            try:
                events = self.sel.select(timeout=0.5)
            except OSError:
                if self.stopping:
                    return
                raise
            for key, _ in events:
                if key.fileobj == self._wake_r:  # stop() says so: the loop's test ends it
                    continue
                try:
                    if key.fileobj is self.sock:
                        self._accept()
                    else:
                        self._read(key.fileobj)
                except Exception:  # one connection's trouble (or stop() closing it) never ends the server
                    if self.stopping:
                        return
                    if key.fileobj is not self.sock:
                        self._close(key.fileobj)

    def _accept(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        try:
            uid = peer_uid(conn)
        except OSError:
            conn.close()
            return
        if uid != self.uid or len(self.buffers) >= MAX_CLIENTS:
            why = "refused: peer uid %d is not this process's (%d)" % (uid, self.uid) if uid != self.uid else "refused: too many clients"
            try:
                conn.sendall((json.dumps({"id": None, "ok": False, "error": why}) + "\n").encode())
            except OSError:
                pass
            conn.close()
            return
        conn.setblocking(False)
        self.buffers[conn] = b""
        self.sel.register(conn, selectors.EVENT_READ)

    def _read(self, conn):
        try:
            chunk = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not chunk:
            self._close(conn)
            return
        buf = self.buffers.get(conn, b"") + chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                self._send(conn, handle_line(line, self.handlers))
            if conn not in self.buffers:
                return
        if len(buf) > MAX_LINE:
            self._send(conn, {"id": None, "ok": False, "error": "line longer than %d bytes: connection closed" % MAX_LINE})
            self._close(conn)
            return
        self.buffers[conn] = buf

    def stop(self):
        self.stopping = True
        with self._wake_lock:
            if self._wake_w >= 0:
                try:
                    os.write(self._wake_w, b"x")
                except OSError:
                    pass  # full: a wake is pending already
        try:
            self.sock.close()
        except OSError:
            pass
        for conn in list(self.buffers):
            self._close(conn)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        if not self.thread.is_alive():
            self._close_selector()  # never started, or ended already: nobody else will close it
