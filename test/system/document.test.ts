// The document's processes: once per GPU a process uses, each with the figures of that GPU, and
// a process in a container under its host pid with its agent's pid beside it. Shaped as a
// torchrun DDP job on two H200s gives them (both GPUs visible to each rank, rank r on cuda:r).
import { describe, expect, test } from "bun:test";
import type { DeviceTotals, RingHeader } from "../../src/ffi/events";
import type { NvmlDeviceSample } from "../../src/ffi/nvml";
import { joinAgents } from "../../src/system/join";
import type { Manifest } from "../../src/system/manifest";
import type { PidNsInfo, ProcessInfo } from "../../src/system/process";
import { LiveModels } from "../../src/collect/live";
import type { Agent } from "../../src/collect/agents";
import { buildDocument, nvmlUse, type AgentView, type DocumentInput } from "../../src/system/document";
import { DocumentSchema } from "../../src/system/schema";

const GiB = 1024 ** 3;
const UUIDS = ["GPU-6f1d3a2e-8c4b-4f6e-9a1b-2c3d4e5f6a70", "GPU-0b9e7c51-3d2a-4c8f-b6e1-7a8f9d0c1e21"];
const HOST_NS = 4026531836;
const CONTAINER_NS = 4026532178;
/** NVML used minus reserved: a CUDA context and its libraries. */
const CONTEXT = 517 * 1024 * 1024;

function totals(device: number, reserved: number, allocated = reserved / 2): DeviceTotals {
  return { device, allocated, reserved, active: allocated, peak_allocated: allocated * 1.5, peak_reserved: reserved, peak_active: allocated * 1.5, n_alloc: 100 + device, n_free: 50, n_segment_alloc: 4, n_segment_free: 0, n_oom: 0, n_retries: 0, requested: allocated };
}

function header(pid: number, t: DeviceTotals[]): RingHeader {
  return { abi_version: 8, capacity: 1024, pid, mode: "hook", n_devices: t.length, attach_unix_us: 0, updated_unix_us: 0, current_step: 7, current_range: 0, current_line: 0, current_phase: 1, closed: false, write_index: 0, totals: t };
}

function agentView(pid: number, t: DeviceTotals[], m: Partial<Manifest> = {}): AgentView {
  const manifest: Manifest = {
    version: 1, pid, cmdline: ["python", "train.py"], rank: null, local_rank: null, world_size: null, job: null, local_world_size: null, group_rank: null,
    devices: t.map((x) => x.device), device_uuids: t.map((x) => UUIDS[x.device]!), cuda_visible_devices: null, pid_namespace: HOST_NS, host_pid: null,
    torch_version: "2.11.0+cu130", hook_mode: "hook", hook_error: null, segment_pools: false, stack_min_bytes: 0, stack_sample_bytes: 0, stacks: {}, ring: `/dev/shm/x/${pid}.ring`, socket: `/dev/shm/x/${pid}.sock`, ranges: {}, lines: {},
    oom_snapshot: null, notes: {}, final_names: null, nvml_used_bytes: null, started_unix_ns: null, ...m,
  };
  return { pid, manifest, header: header(pid, t), exited: false };
}

function gpu(index: number, processes: [number, number][]): NvmlDeviceSample {
  return { index, name: "NVIDIA H200", uuid: UUIDS[index]!, pci_bus_id: `00000000:${index === 0 ? "19" : "3B"}:00.0`, fields: { memory_total_bytes: 150 * GiB }, processes: processes.map(([pid, used]) => ({ pid, kind: "compute", used_bytes: used, sm_percent: null })), process_api: 3, error: null };
}

function doc(samples: NvmlDeviceSample[], agents: AgentView[], extra: Partial<DocumentInput> = {}) {
  const info = new Map<number, ProcessInfo>();
  for (const s of samples) for (const p of s.processes) info.set(p.pid, { user: "alice", name: "python3", command: `python3 train.py #${p.pid}`, uid: 1000, ppid: 4700 });
  return DocumentSchema.parse(buildDocument({ time_unix_ms: 0, host: "h200", system: null, reason: null, samples, rateFrom: new Map(), processInfo: info, agents, warnings: [], ...extra }));
}

// torchrun --nproc-per-node 2: rank 0 (pid 4801) on cuda:0, rank 1 (pid 4802) on cuda:1; each sees
// both GPUs, and each ring counts both devices (the other's at zero).
const RANK0 = agentView(4801, [totals(0, 40 * GiB), totals(1, 0)], { rank: 0, local_rank: 0, world_size: 2 });
const RANK1 = agentView(4802, [totals(0, 0), totals(1, 36 * GiB)], { rank: 1, local_rank: 1, world_size: 2 });
const DDP = [gpu(0, [[4801, 40 * GiB + CONTEXT]]), gpu(1, [[4802, 36 * GiB + CONTEXT]])];

describe("processes on the GPUs they use", () => {
  test("a DDP rank appears once, on its own GPU, with its own numbers", () => {
    const d = doc(DDP, [RANK0, RANK1]);
    expect(d.processes.map((p) => [p.pid, p.device, p.pytorch?.device, p.pytorch?.reserved_bytes, p.pytorch?.non_pytorch_bytes])).toEqual([
      [4801, 0, 0, 40 * GiB, CONTEXT],
      [4802, 1, 1, 36 * GiB, CONTEXT],
    ]);
    expect(d.processes.map((p) => [p.agent_pid, p.nvml_visible])).toEqual([[4801, true], [4802, true]]);
    expect(d.jobs[0]!.ranks.map((r) => [r.rank, r.device, r.reserved_bytes])).toEqual([[0, 0, 40 * GiB], [1, 1, 36 * GiB]]);
    expect(d.warnings).toEqual([]);
  });

  test("a rank NVML also lists on the other GPU (a stray context) shows there with that GPU's figures, not its own twice", () => {
    const stray = [gpu(0, [[4801, 40 * GiB + CONTEXT], [4802, CONTEXT]]), gpu(1, [[4802, 36 * GiB + CONTEXT]])];
    const d = doc(stray, [RANK0, RANK1]);
    expect(d.processes.filter((p) => p.pid === 4802).map((p) => [p.device, p.pytorch?.device, p.pytorch?.reserved_bytes])).toEqual([
      [0, 0, 0],
      [1, 1, 36 * GiB],
    ]);
    expect(d.jobs[0]!.ranks[1]!.reserved_bytes).toBe(36 * GiB);
  });

  test("CUDA_VISIBLE_DEVICES=1,0: cuda:0's figures on NVML's GPU 1", () => {
    const a = agentView(5000, [totals(0, 20 * GiB), totals(1, 2 * GiB)], { device_uuids: [UUIDS[1]!, UUIDS[0]!], cuda_visible_devices: "1,0" });
    const d = doc([gpu(0, [[5000, 2 * GiB + CONTEXT]]), gpu(1, [[5000, 20 * GiB + CONTEXT]])], [a]);
    expect(d.processes.map((p) => [p.device, p.pytorch?.device, p.pytorch?.reserved_bytes, p.pytorch?.non_pytorch_bytes])).toEqual([
      [0, 1, 2 * GiB, CONTEXT],
      [1, 0, 20 * GiB, CONTEXT],
    ]);
  });

  test("agents NVML does not list: on the GPUs their rings count memory on, else their one GPU", () => {
    const busy = agentView(5100, [totals(0, 0), totals(1, 8 * GiB)]);
    const idle = agentView(5200, [totals(0, 0)], { devices: [0], device_uuids: [UUIDS[1]!] });
    const d = doc([gpu(0, []), gpu(1, [])], [busy, idle]);
    expect(d.processes.map((p) => [p.pid, p.device, p.pytorch?.device, p.used_bytes, p.nvml_visible])).toEqual([
      [5100, 1, 1, null, false],
      [5200, 1, 0, null, false],
    ]);
  });
});

describe("a process in a container (another pid namespace)", () => {
  // `unshare --pid --fork --mount-proc python train.py`: pid 1 inside, 7301 on the host; cuda:0 is
  // NVML's GPU 1. Host pid 1 is init; /proc's facts of it must not be the process's.
  const inside = agentView(1, [totals(0, 12 * GiB)], { devices: [0], device_uuids: [UUIDS[1]!], pid_namespace: CONTAINER_NS, cmdline: ["python", "train.py"] });
  const samples = [gpu(0, [[4801, 40 * GiB + CONTEXT]]), gpu(1, [[7301, 12 * GiB + CONTEXT]])];
  const procs = new Map<number, PidNsInfo>([
    [4801, { nspid: [4801], pid_namespace: HOST_NS }],
    [7301, { nspid: [7301, 1], pid_namespace: CONTAINER_NS }],
  ]);
  const agents = [RANK0, inside];

  test("is listed under its host pid with NVML's memory and its agent's figures, its own pid beside", () => {
    const join = joinAgents({ devices: samples, agents, procs, ownPidNamespace: HOST_NS });
    const d = doc(samples, agents, { join });
    const p = d.processes.find((x) => x.agent_pid === 1)!;
    expect([p.pid, p.device, p.pid_namespace, p.used_bytes, p.nvml_visible, p.command]).toEqual([7301, 1, CONTAINER_NS, 12 * GiB + CONTEXT, true, "python3 train.py #7301"]);
    expect(p.pytorch).toMatchObject({ device: 0, reserved_bytes: 12 * GiB, non_pytorch_bytes: CONTEXT });
    expect(d.processes).toHaveLength(2);
    expect(d.warnings).toEqual([]);
  });

  test("where it cannot be joined: shown apart, with no NVML memory and no host facts, and said", () => {
    const blind = new Map<number, PidNsInfo>([...procs].map(([pid, x]) => [pid, { ...x, pid_namespace: null }]));
    const join = joinAgents({ devices: samples, agents, procs: blind, ownPidNamespace: HOST_NS });
    const init: ProcessInfo = { user: "root", name: "systemd", command: "/sbin/init", uid: 0, ppid: 0 };
    const d = doc(samples, agents, { join, processInfo: new Map([[1, init]]) });
    const rows = d.processes.filter((x) => x.agent_pid === 1);
    expect(rows.map((p) => [p.pid, p.device, p.used_bytes, p.nvml_visible, p.user, p.command, p.pytorch?.reserved_bytes])).toEqual([[1, 1, null, false, null, "python train.py", 12 * GiB]]);
    expect(d.processes.find((x) => x.pid === 7301)!.pytorch).toBeNull();
    expect(d.warnings).toEqual([`agent of pid 1 (pid namespace ${CONTAINER_NS}): NVML pid 7301 has that pid in some namespace, but their pid namespaces cannot be read: not joined`]);
  });

  test("the monitor's model of it gets NVML's memory on the CUDA index of that GPU", () => {
    const join = joinAgents({ devices: samples, agents, procs, ownPidNamespace: HOST_NS });
    const live = new LiveModels();
    const asAgents: Agent[] = agents.map((a) => ({ ...a, manifestStamp: "", ring: null, problem: null }));
    live.update(asAgents, nvmlUse({ time_unix_ms: 0, host: "h200", system: null, reason: null, samples, rateFrom: new Map(), processInfo: new Map(), agents, warnings: [], join }), 1_000_000);
    const m = live.byPid.get(1)!.model;
    expect([m.device(0)?.nvmlUsed, m.device(0)?.nvmlPid, m.device(1)]).toEqual([12 * GiB + CONTEXT, 7301, undefined]);
    expect(live.byPid.get(4801)!.model.device(0)?.nvmlUsed).toBe(40 * GiB + CONTEXT);
  });
});
