// Joining agents to NVML: host pids for processes in containers, CUDA indexes to NVML's. Pure
// inputs shaped as the machine gives them: a torchrun DDP job on two GPUs, CUDA_VISIBLE_DEVICES
// that reorders, a process in its own pid namespace, facts that cannot tell two processes apart.
import { describe, expect, test } from "bun:test";
import { joinAgents, mapDevices, parseCudaVisibleDevices, type JoinAgent, type JoinDevice } from "../../src/system/join";
import type { PidNsInfo } from "../../src/system/process";

const UUID0 = "GPU-6f1d3a2e-8c4b-4f6e-9a1b-2c3d4e5f6a70";
const UUID1 = "GPU-0b9e7c51-3d2a-4c8f-b6e1-7a8f9d0c1e21";
const HOST_NS = 4026531836;
const CONTAINER_NS = 4026532178;
const OTHER_CONTAINER_NS = 4026532301;

function gpus(lists: number[][]): JoinDevice[] {
  return lists.map((pids, index) => ({ index, uuid: [UUID0, UUID1][index]!, processes: pids.map((pid) => ({ pid })) }));
}

function agent(pid: number, m: Partial<JoinAgent["manifest"]> = {}, extra: Partial<JoinAgent> = {}): JoinAgent {
  return { pid, manifest: { devices: [0, 1], device_uuids: [UUID0, UUID1], cuda_visible_devices: null, pid_namespace: HOST_NS, host_pid: null, ...m }, ...extra };
}

const entries = (m: Map<number, number>) => [...m.entries()].sort((a, b) => a[0] - b[0]);

describe("device join", () => {
  test("torchrun, 2 ranks on 2 GPUs, both GPUs visible to each: CUDA index i is NVML index i by UUID", () => {
    const r = joinAgents({ devices: gpus([[4801], [4802]]), agents: [agent(4801), agent(4802)], procs: new Map(), ownPidNamespace: HOST_NS });
    for (const pid of [4801, 4802]) {
      const j = r.agents.get(pid)!;
      expect(j.hostPid).toBe(pid);
      expect(j.otherNamespace).toBe(false);
      expect(entries(j.cudaToNvml)).toEqual([[0, 0], [1, 1]]);
      expect([...j.how.values()]).toEqual(["uuid", "uuid"]);
    }
    expect(entries(r.byHostPid)).toEqual([[4801, 4801], [4802, 4802]]);
    expect(r.warnings).toEqual([]);
  });

  test("CUDA_VISIBLE_DEVICES=1,0: CUDA 0 is NVML 1 and CUDA 1 is NVML 0, by UUID and, without UUIDs, by the variable", () => {
    const devices = gpus([[4900], [4900]]);
    const byUuid = joinAgents({ devices, agents: [agent(4900, { device_uuids: [UUID1, UUID0], cuda_visible_devices: "1,0" })], procs: new Map(), ownPidNamespace: HOST_NS });
    expect(entries(byUuid.agents.get(4900)!.cudaToNvml)).toEqual([[0, 1], [1, 0]]);
    expect(entries(byUuid.agents.get(4900)!.nvmlToCuda)).toEqual([[0, 1], [1, 0]]);
    // An older torch says no UUIDs: the variable's list says the same.
    const byList = joinAgents({ devices, agents: [agent(4900, { device_uuids: [null, null], cuda_visible_devices: "1,0" })], procs: new Map(), ownPidNamespace: HOST_NS });
    expect(entries(byList.agents.get(4900)!.cudaToNvml)).toEqual([[0, 1], [1, 0]]);
    expect([...byList.agents.get(4900)!.how.values()]).toEqual(["cuda_visible_devices", "cuda_visible_devices"]);
    // A UUID in the variable (CUDA takes a unique prefix too).
    const prefix = mapDevices(agent(4900, { devices: [0], device_uuids: [], cuda_visible_devices: UUID1.slice(0, 12) }), devices);
    expect(entries(prefix.cudaToNvml)).toEqual([[0, 1]]);
  });

  test("one visible GPU (CUDA_VISIBLE_DEVICES=1): CUDA 0 is NVML 1 by UUID, by NVML's list, by the variable; index for index only where nothing says", () => {
    const devices = gpus([[], [5000]]);
    const one = (m: Partial<JoinAgent["manifest"]>) => joinAgents({ devices, agents: [agent(5000, { devices: [0], ...m })], procs: new Map(), ownPidNamespace: HOST_NS }).agents.get(5000)!;
    expect([one({ device_uuids: [UUID1] }).cudaToNvml.get(0), one({ device_uuids: [UUID1] }).how.get(0)]).toEqual([1, "uuid"]);
    expect([one({ device_uuids: [] }).cudaToNvml.get(0), one({ device_uuids: [] }).how.get(0)]).toEqual([1, "nvml_single"]);
    // Not yet listed by NVML (no context yet): the variable.
    const unlisted = mapDevices(agent(5000, { devices: [0], device_uuids: [], cuda_visible_devices: "1" }), devices, []);
    expect([unlisted.cudaToNvml.get(0), unlisted.how.get(0)]).toEqual([1, "cuda_visible_devices"]);
    // Nothing says: index for index.
    const bare = mapDevices(agent(5000, { devices: [0], device_uuids: [] }), devices, []);
    expect([bare.cudaToNvml.get(0), bare.how.get(0)]).toEqual([0, "identity"]);
  });

  test("a stronger join keeps its NVML index from a weaker one; a variable CUDA stops reading ends the list", () => {
    // CUDA 1's UUID says NVML 0; CUDA 0 has none and the identity would also say NVML 0: it is left unjoined.
    const m = mapDevices(agent(1, { device_uuids: [null, UUID0] }), gpus([[], []]));
    expect(entries(m.cudaToNvml)).toEqual([[1, 0]]);
    expect(parseCudaVisibleDevices("1,0")).toEqual([1, 0]);
    expect(parseCudaVisibleDevices(" GPU-0B9E ,1")).toEqual(["gpu-0b9e", 1]);
    expect(parseCudaVisibleDevices("0,foo,1")).toEqual([0]);
    expect(parseCudaVisibleDevices("")).toEqual([]);
    expect(parseCudaVisibleDevices(null)).toBeNull();
  });
});

describe("pid join", () => {
  // `unshare --pid --fork --mount-proc python train.py` as pid 7301 on the host: pid 1 inside. A
  // second container's pid 1 is 7402 on the host; a host process 1 is init, never NVML's.
  const procs = new Map<number, PidNsInfo>([
    [7301, { nspid: [7301, 1], pid_namespace: CONTAINER_NS }],
    [7402, { nspid: [7402, 1], pid_namespace: OTHER_CONTAINER_NS }],
    [4801, { nspid: [4801], pid_namespace: HOST_NS }],
  ]);

  test("an agent in a container is joined to the host pid whose innermost NSpid and namespace are its own", () => {
    const inContainer = agent(1, { devices: [0], device_uuids: [UUID1], pid_namespace: CONTAINER_NS });
    const r = joinAgents({ devices: gpus([[4801], [7301, 7402]]), agents: [inContainer, agent(4801)], procs, ownPidNamespace: HOST_NS });
    const j = r.agents.get(1)!;
    expect([j.hostPid, j.otherNamespace]).toEqual([7301, true]);
    expect(entries(j.cudaToNvml)).toEqual([[0, 1]]);
    expect(r.byHostPid.get(7301)).toBe(1);
    expect(r.byHostPid.get(4801)).toBe(4801);
    expect(r.byHostPid.has(7402)).toBe(false);
    expect(r.warnings).toEqual([]);
  });

  test("the other container's pid 1 is joined to its own agent, not to this one", () => {
    const other = agent(1, { devices: [0], device_uuids: [UUID1], pid_namespace: OTHER_CONTAINER_NS });
    expect(joinAgents({ devices: gpus([[], [7301, 7402]]), agents: [other], procs, ownPidNamespace: HOST_NS }).agents.get(1)!.hostPid).toBe(7402);
  });

  test("namespaces that cannot be read: two candidates are reported, not guessed; one is not taken on trust either", () => {
    const blind = new Map<number, PidNsInfo>([
      [7301, { nspid: [7301, 1], pid_namespace: null }],
      [7402, { nspid: [7402, 1], pid_namespace: null }],
    ]);
    const a = agent(1, { devices: [0], pid_namespace: CONTAINER_NS });
    const two = joinAgents({ devices: gpus([[7301], [7402]]), agents: [a], procs: blind, ownPidNamespace: HOST_NS });
    expect(two.agents.get(1)!.hostPid).toBeNull();
    expect(two.byHostPid.size).toBe(0);
    expect(two.warnings).toEqual([`agent of pid 1 (pid namespace ${CONTAINER_NS}): NVML pids 7301, 7402 each have that pid in some namespace, but their pid namespaces cannot be read: not joined`]);
    const one = joinAgents({ devices: gpus([[7301], []]), agents: [a], procs: blind, ownPidNamespace: HOST_NS });
    expect(one.agents.get(1)!.hostPid).toBeNull();
    expect(one.warnings[0]).toContain("NVML pid 7301 has that pid in some namespace");
    // Facts that name two processes as one: neither.
    const twice = new Map<number, PidNsInfo>([
      [7301, { nspid: [7301, 1], pid_namespace: CONTAINER_NS }],
      [7302, { nspid: [7302, 1], pid_namespace: CONTAINER_NS }],
    ]);
    const both = joinAgents({ devices: gpus([[7301], [7302]]), agents: [a], procs: twice, ownPidNamespace: HOST_NS });
    expect(both.agents.get(1)!.hostPid).toBeNull();
    expect(both.warnings[0]).toContain("NVML lists pids 7301, 7302, each with that pid in that namespace: not joined");
  });

  test("not listed by NVML: said; the host pid found before is kept unless /proc now says it is another process", () => {
    const a = agent(1, { devices: [0], pid_namespace: CONTAINER_NS });
    const none = joinAgents({ devices: gpus([[], []]), agents: [a], procs: new Map(), ownPidNamespace: HOST_NS });
    expect(none.agents.get(1)!.hostPid).toBeNull();
    expect(none.warnings).toEqual([`agent of pid ${1} (pid namespace ${CONTAINER_NS}): runs in another pid namespace and no process NVML lists is it; its NVML memory is not shown`]);
    // It exited: NVML no longer lists it, /proc has nothing; the pid found before stays, no warning.
    const gone = joinAgents({ devices: gpus([[], []]), agents: [{ ...a, hostPid: 7301, exited: true }], procs: new Map(), ownPidNamespace: HOST_NS });
    expect([gone.agents.get(1)!.hostPid, gone.warnings]).toEqual([7301, []]);
    // The pid was taken by another process since.
    const reused = new Map<number, PidNsInfo>([[7301, { nspid: [7301], pid_namespace: HOST_NS }]]);
    expect(joinAgents({ devices: gpus([[], []]), agents: [{ ...a, hostPid: 7301 }], procs: reused, ownPidNamespace: HOST_NS }).agents.get(1)!.hostPid).toBeNull();
  });

  test("agents in the monitor's namespace, or that do not say theirs (older agents), are their own host pids", () => {
    const r = joinAgents({ devices: gpus([[4801], []]), agents: [agent(4801), agent(4802, { pid_namespace: null })], procs: new Map(), ownPidNamespace: HOST_NS });
    expect([r.agents.get(4801)!.hostPid, r.agents.get(4802)!.hostPid]).toEqual([4801, 4802]);
    // A monitor that cannot read its own namespace joins as before.
    expect(joinAgents({ devices: [], agents: [agent(1, { pid_namespace: CONTAINER_NS })], procs: new Map(), ownPidNamespace: null }).agents.get(1)!.hostPid).toBe(1);
  });
});
