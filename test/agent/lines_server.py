"""A control server answering `lines` with a real line profile (test/tui/lines.test.tsx): the
profiler follows a function on a real ring file, as test_lines.py does, then serves its results
through the agent's own ControlServer. Prints the socket path, then the ring and its line names,
then waits for stdin to close."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent.control import ControlServer  # noqa: E402
from test_lines import Tracer  # noqa: E402

t = Tracer("test_each_line_gets_its_records_and_the_header_names_it")
t.setUp()
MiB = 1 << 20


def step(n):
    big = t.push("alloc", 8 * MiB)  # eight MiB
    for _ in range(n):
        t.push("alloc", MiB)  # one MiB each time round
    t.push("free_requested", 8 * MiB)  # give the eight back
    return big


f = t.profiler.wrap(step)
f(2)
f(2)
path = os.path.join(tempfile.mkdtemp(), "s.sock")
srv = ControlServer(path, {"lines": lambda: {"functions": t.profiler.stats()}}).start()
print(path, flush=True)
# The ring the profiled calls wrote and the names of its lines: the monitor's own model reads both.
print(json.dumps({"ring": t.ring.path, "lines": t.profiler.line_names}), flush=True)
sys.stdin.read()
srv.stop()
