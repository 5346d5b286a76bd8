"""The control server gives back every descriptor it opened when it stops: its socket, its
clients' connections and its selector (an epoll descriptor), whichever thread stops it. An agent
attached and detached again and again must not leak one per cycle. Standard library only, run by
`bun test` (test/agent/control-stop.test.ts)."""
import os
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent.control import ControlServer  # noqa: E402

CYCLES = 10


def open_fds():
    return sorted(os.listdir("/proc/self/fd"))


def epoll_fds():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == "anon_inode:[eventpoll]":
                out.append(fd)
        except OSError:
            pass  # listdir's own descriptor, gone
    return out


class Stop(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumem-control-stop-")
        self.path = os.path.join(self.dir, "1.sock")

    def settle(self, before):
        # The serving thread closes its selector as it leaves its last select (at most 0.5 s).
        deadline = time.time() + 3
        while time.time() < deadline and len(open_fds()) != len(before):
            time.sleep(0.02)

    def test_start_stop_cycles_leave_no_descriptor(self):
        before = open_fds()
        for _ in range(CYCLES):
            s = ControlServer(self.path, {"ping": lambda: {}}).start()
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(5)
            c.connect(self.path)
            c.sendall(b'{"cmd": "ping"}\n')
            self.assertIn(b'"ok": true', c.recv(4096))
            s.stop()
            s.thread.join(5)
            c.close()
            self.assertFalse(s.thread.is_alive())
        self.settle(before)
        self.assertEqual(epoll_fds(), [])
        self.assertEqual(len(open_fds()), len(before))

    def test_stopped_from_its_own_thread(self):
        """A handler (detach, the guard turning control off) may stop the server from its thread."""
        before = open_fds()
        box = {}

        def detach():
            box["server"].stop()
            return {}

        for _ in range(CYCLES):
            box["server"] = s = ControlServer(self.path, {"detach": detach}).start()
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(5)
            c.connect(self.path)
            c.sendall(b'{"cmd": "detach"}\n')
            c.recv(4096)
            s.thread.join(5)
            c.close()
            self.assertFalse(s.thread.is_alive())
        self.settle(before)
        self.assertEqual(epoll_fds(), [])
        self.assertEqual(len(open_fds()), len(before))

    def test_stopped_before_it_started(self):
        before = open_fds()
        for _ in range(CYCLES):
            ControlServer(self.path, {}).stop()
        self.assertEqual(epoll_fds(), [])
        self.assertEqual(len(open_fds()), len(before))


if __name__ == "__main__":
    unittest.main()
