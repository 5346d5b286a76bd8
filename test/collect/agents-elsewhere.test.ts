// An agent in another pid namespace whose host pid the monitor never finds (a container's view:
// the driver lists NVML no process outside it, so no NVML pid joins it): its own pid names no
// process here, and its files may stay after it ended (kept at exit for a monitor of its own
// namespace, or left by a killed process). On an H200 the monitor in a pid namespace of its own
// showed such a process (lines_train.py, minutes after it ended) as live, step 8, no memory. Its
// ring is what tells: closed by the agent's exit, or no longer stamped by the agent's sync thread.
// The ring is the native producer's; the header fields are written with the agent's own Ring.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentWatcher } from "../../src/collect/agents";
import { ownPidNamespace, pidAlive } from "../../src/collect/procfs";
import { agentWrites, runningAgentRing } from "../support/agent-header";
import { produce } from "../support/native";

/** A ring and manifest of a pid that names no process here, in a pid namespace not the monitor's. */
function elsewhere(): { dir: string; pid: number; ring: string } {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-agents-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  let pid = 3_900_000;
  while (pidAlive(pid)) pid--;
  const ring = join(dir, `${pid}.ring`);
  produce(ring, 64, 11, "--pid", pid);
  runningAgentRing(ring);
  const m = { version: 1, pid, cmdline: ["python", "lines_train.py"], devices: [0], torch_version: "2.11.0", hook_mode: "hook", ring, socket: join(dir, `${pid}.sock`), pid_namespace: (ownPidNamespace() ?? 0) + 1 };
  writeFileSync(join(dir, `${pid}.json`), JSON.stringify(m), { mode: 0o600 });
  return { dir, pid, ring };
}

describe("an agent in another pid namespace, its host pid never found", () => {
  test("stamped now: alive, as before", () => {
    const { dir, ring } = elsewhere();
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect([a!.exited, a!.endedElsewhere]).toEqual([false, undefined]);
    expect(w.refresh()[0]!.exited).toBe(false);
    w.close();
  });

  test("its ring closed (the agent's exit, files kept): exited at the first refresh, said so, its files left to its own namespace", () => {
    const { dir, pid, ring } = elsewhere();
    agentWrites(ring, `r.set("<B", "closed", 1)`);
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect(a!.exited).toBe(true);
    expect(a!.endedElsewhere).toBe("its ring is closed (its agent's exit)");
    expect(w.problems).toContain(`agent of pid ${pid} (pid namespace ${(ownPidNamespace() ?? 0) + 1}): shown as exited: its ring is closed (its agent's exit), and no process NVML lists here is it`);
    expect(existsSync(join(dir, `${pid}.json`))).toBe(true);
    w.close();
  });

  test("not stamped for 90 s (killed: no exit path ran): exited at the first refresh, said so", () => {
    const { dir, ring } = elsewhere();
    agentWrites(ring, `r.set("<Q", "updated_ns", time.time_ns() - 90 * 10**9)`);
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect(a!.exited).toBe(true);
    expect(a!.endedElsewhere).toMatch(/^its agent has not stamped its ring for 9\d s \(every 0\.25 s while it runs\)$/);
    w.close();
  });
});
