// Header fields written into a ring as the agent writes them (agent/gpumem_agent/ring.py's Ring):
// `closed` at its exit (Ring.finish), `updated_ns` at each sync of its sync thread. For rings the
// native producer made, which it closes as it ends: a running agent's ring is open.
import { expect } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";

/** Runs `code` (Python, with `r` the ring opened for writing and `time` imported) on `ring`. */
export function agentWrites(ring: string, code: string): void {
  const py = Bun.spawnSync(["python3", "-c", `import sys, time; sys.path.insert(0, ${JSON.stringify(join(ROOT, "agent"))})
from gpumem_agent.ring import Ring
r = Ring(${JSON.stringify(ring)}, create=False); ${code}`]);
  expect(new TextDecoder().decode(py.stderr)).toBe("");
}

/** The ring as a running agent's: open, stamped now. */
export function runningAgentRing(ring: string): void {
  agentWrites(ring, `r.set("<B", "closed", 0); r.set("<Q", "updated_ns", time.time_ns())`);
}
