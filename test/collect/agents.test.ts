// Discovering agents: manifests that lie, directories others could write, processes that exit.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentWatcher } from "../../src/collect/agents";
import { ownPidNamespace, pidAlive } from "../../src/collect/procfs";
import { runningAgentRing } from "../support/agent-header";
import { produce } from "../support/native";

function agentDir(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-agents-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

function manifest(dir: string, pid: number, extra: Record<string, unknown> = {}) {
  const m = { version: 1, pid, cmdline: ["python", "train.py"], devices: [0], torch_version: "2.11.0", hook_mode: "hook", ring: join(dir, `${pid}.ring`), socket: join(dir, `${pid}.sock`), ...extra };
  writeFileSync(join(dir, `${pid}.json`), JSON.stringify(m), { mode: 0o600 });
}

/** A live process of our own that is not the ring's writer. */
function sleeper() {
  return Bun.spawn(["sleep", "30"]);
}

describe("agent discovery", () => {
  test("a live agent: manifest read, ring opened, exact totals from its header", () => {
    const dir = agentDir();
    const s = sleeper();
    produce(join(dir, `${s.pid}.ring`), 64, 11, "--pid", s.pid);
    manifest(dir, s.pid);
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect(a!.problem).toBeNull();
    expect(a!.header!.mode).toBe("hook");
    // 11 events: allocs of blocks 0..5 (block b is 512*(1+b) bytes) and frees of 0..4: block 5 is live.
    expect(a!.header!.totals[0]!.n_alloc).toBe(6);
    expect(a!.header!.totals[0]!.allocated).toBe(512 * 6);
    s.kill();
    w.close();
  });

  test("a manifest pointing at another process's ring is refused, not attributed", () => {
    const dir = agentDir();
    const s = sleeper();
    produce(join(dir, `${s.pid}.ring`), 64, 10); // written by the producer's own pid
    manifest(dir, s.pid);
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect(a!.problem).toMatch(new RegExp(`was written by pid \\d+, but the manifest is pid ${s.pid}'s: ignored`));
    expect(a!.header).toBeNull();
    s.kill();
    w.close();
  });

  test("a manifest that is not JSON, or lacks fields, is reported with its path and field", () => {
    const dir = agentDir();
    const s1 = sleeper();
    const s2 = sleeper();
    writeFileSync(join(dir, `${s1.pid}.json`), "{not json");
    manifest(dir, s2.pid, { hook_mode: "magic" });
    const w = new AgentWatcher(dir);
    expect(w.refresh()).toEqual([]);
    expect(w.problems.join("\n")).toMatch(new RegExp(`manifest .*${s1.pid}\\.json is not JSON`));
    expect(w.problems.join("\n")).toMatch(new RegExp(`manifest .*${s2.pid}\\.json is invalid at hook_mode`));
    s1.kill();
    s2.kill();
  });

  test("a manifest whose pid differs from its file name is refused", () => {
    const dir = agentDir();
    const s = sleeper();
    manifest(dir, s.pid);
    const lying = JSON.parse(readFileSync(join(dir, `${s.pid}.json`), "utf8"));
    lying.pid = 1;
    writeFileSync(join(dir, `${s.pid}.json`), JSON.stringify(lying));
    const w = new AgentWatcher(dir);
    expect(w.refresh()).toEqual([]);
    expect(w.problems[0]).toMatch(new RegExp(`names pid 1, its file name says ${s.pid}`));
    s.kill();
  });

  test("a ring that is missing or of another ABI is a problem of that agent, not a crash", () => {
    const dir = agentDir();
    const s1 = sleeper();
    const s2 = sleeper();
    manifest(dir, s1.pid); // no ring file at all
    produce(join(dir, `${s2.pid}.ring`), 64, 1, "--abi", "9");
    manifest(dir, s2.pid);
    const w = new AgentWatcher(dir);
    const agents = w.refresh();
    expect(agents.find((a) => a.pid === s1.pid)!.problem).toMatch(/cannot open ring .*No such file/);
    expect(agents.find((a) => a.pid === s2.pid)!.problem).toMatch(/ABI version 9/);
    s1.kill();
    s2.kill();
  });

  test("an agent whose process exited is marked exited and its files are removed", async () => {
    const dir = agentDir();
    const s = sleeper();
    manifest(dir, s.pid);
    const w = new AgentWatcher(dir);
    expect(w.refresh()[0]!.exited).toBe(false);
    s.kill();
    await s.exited;
    const [a] = w.refresh();
    expect(a!.exited).toBe(true);
    expect(a!.manifest.cmdline).toEqual(["python", "train.py"]); // last data kept
    expect(existsSync(join(dir, `${s.pid}.json`))).toBe(false);
  });

  test("a process that exits right after its last numbers: the monitor still gets them, files gone or not", async () => {
    const dir = agentDir();
    const s = sleeper();
    const ringPath = join(dir, `${s.pid}.ring`);
    produce(ringPath, 64, 11, "--pid", s.pid);
    manifest(dir, s.pid);
    const w = new AgentWatcher(dir);
    expect(w.refresh()[0]!.header!.totals[0]!.n_alloc).toBe(6);
    // What the agent does at exit (agent.py close): final totals into the header, files removed.
    const py = Bun.spawnSync(["python3", "-c", `import sys; sys.path.insert(0, ${JSON.stringify(join(import.meta.dir, "..", "..", "agent"))})
from gpumem_agent.ring import Ring
r = Ring(${JSON.stringify(ringPath)}, create=False); r.set_totals(0, allocated=999424, n_alloc=42, n_oom=1); r.set("<B", "closed", 1)`]);
    expect(py.exitCode).toBe(0);
    unlinkSync(ringPath);
    s.kill();
    await s.exited;
    const [a] = w.refresh();
    expect(a!.exited).toBe(true);
    expect([a!.header!.totals[0]!.n_alloc, a!.header!.totals[0]!.allocated, a!.header!.totals[0]!.n_oom, a!.header!.closed]).toEqual([42, 999424, 1, true]);
    expect(a!.ring).not.toBeNull(); // open one refresh longer, for the last events
    w.refresh();
    expect(a!.ring).toBeNull();
    w.close();
  });

  test("an agent in another pid namespace: its own pid says nothing of it here; its host pid, once found, does", async () => {
    const dir = agentDir();
    // A container's pid that names no process here (what the agent calls itself, not the host).
    let nsPid = 4_000_000;
    while (pidAlive(nsPid)) nsPid--;
    const container = (ownPidNamespace() ?? 0) + 1;
    const host = sleeper();
    produce(join(dir, `${nsPid}.ring`), 64, 11, "--pid", nsPid);
    runningAgentRing(join(dir, `${nsPid}.ring`)); // the producer closes its ring as it ends: this one runs
    manifest(dir, nsPid, { pid_namespace: container });
    const w = new AgentWatcher(dir);
    const [a] = w.refresh();
    expect([a!.exited, a!.problem, a!.hostPid]).toEqual([false, null, null]);
    expect(w.refresh()[0]!.exited).toBe(false);
    expect(existsSync(join(dir, `${nsPid}.json`))).toBe(true); // not taken for stale
    // The collector found its host pid (src/system/join.ts): liveness is that process's.
    a!.hostPid = host.pid;
    expect(w.refresh()[0]!.exited).toBe(false);
    host.kill();
    await host.exited;
    expect(w.refresh()[0]!.exited).toBe(true);
    expect(existsSync(join(dir, `${nsPid}.json`))).toBe(false);
    // Before any host pid is found, files the agent removed at exit say it ended.
    const other = nsPid - 1;
    manifest(dir, other, { pid_namespace: container, ring: join(dir, "none.ring") });
    expect(w.refresh().find((x) => x.pid === other)!.exited).toBe(false);
    unlinkSync(join(dir, `${other}.json`));
    expect(w.refresh().find((x) => x.pid === other)!.exited).toBe(true);
    w.close();
  });

  test("a directory open to other users is not trusted", () => {
    const dir = agentDir();
    const s = sleeper();
    manifest(dir, s.pid);
    chmodSync(dir, 0o777);
    const w = new AgentWatcher(dir);
    expect(w.refresh()).toEqual([]);
    expect(w.problems[0]).toMatch(/is open to other users \(mode 777\): ignored/);
    s.kill();
  });
  test("eight agents at once (a node of eight ranks): each read on its own, none mistaken for another", () => {
    const dir = agentDir();
    const ranks = Array.from({ length: 8 }, () => sleeper());
    ranks.forEach((s, r) => {
      produce(join(dir, `${s.pid}.ring`), 64, 11 + r, "--pid", s.pid);
      manifest(dir, s.pid, { rank: r, local_rank: r, world_size: 8, devices: [r] });
    });
    const w = new AgentWatcher(dir);
    const agents = w.refresh();
    expect(agents).toHaveLength(8);
    for (const a of agents) {
      expect(a.problem).toBeNull();
      const r = a.manifest.rank!;
      expect(ranks[r]!.pid).toBe(a.pid);
      // 11 + r events: allocs and frees alternate after the first allocations, per the producer.
      expect(a.header!.totals[0]!.n_alloc + a.header!.totals[0]!.n_free).toBe(11 + r);
    }
    for (const s of ranks) s.kill();
    w.close();
  });
});
