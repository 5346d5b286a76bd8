// One sample of the whole machine: NVML for every device, /proc for every process, the agents'
// ring headers. The only place that calls NVML on a schedule; views get the Document.
import { hostname } from "node:os";
import { Nvml, NvmlError, type NvmlDeviceSample, type NvmlSystem } from "../ffi/nvml";
import { NativeLibraryError } from "../ffi/lib";
import { buildDocument } from "../system/document";
import type { Document } from "../system/schema";
import { type Agent, AgentWatcher } from "./agents";
import { joinAgents } from "../system/join";
import { cpuPercent, type PidNsInfo, type ProcessInfo } from "../system/process";
import { inOtherPidNamespace, ownPidNamespace, pidNsInfo, processInfo } from "./procfs";

export class SystemCollector {
  private nvml: Nvml | null = null;
  private system: NvmlSystem | null = null;
  private reason: string | null = null;
  private previous = new Map<number, NvmlDeviceSample>();
  /** Each process's CPU time at the previous sample, for its CPU %. */
  private previousCpu = new Map<number, { seconds: number; ms: number }>();
  /** What /proc said of each agent process while it ran: once it exits /proc has nothing, and an
   *  exited rank keeps its command and launcher (so it stays in its job). */
  private lastInfo = new Map<number, ProcessInfo>();
  readonly agents: AgentWatcher;
  /** The agents as the last sample found them (the directory is scanned once a sample). */
  lastAgents: Agent[] = [];

  /** NVML is opened at the first sample: opening waits for its warm-up thread (src/ffi/warm-up.ts),
   *  and whatever the caller does before that overlaps it. */
  constructor(opts: { agentDir?: string } = {}) {
    this.agents = new AgentWatcher(opts.agentDir);
  }

  private opened = false;
  /** Load NVML, once: waits for the warm-up thread where one runs. */
  open(): void {
    if (this.opened) return;
    this.opened = true;
    try {
      this.nvml = Nvml.open();
      this.system = this.nvml.system();
    } catch (e) {
      // No driver is a normal state (a laptop, CI): the document says why devices is empty.
      if (e instanceof NvmlError || e instanceof NativeLibraryError) this.reason = e.message;
      else throw e;
    }
  }

  /**
   * One sample, as of `now`. `oneShot`: a single sample (`--json --once`): no rates can come of it,
   * so none are read, and where the warm-up kept its own sample of every device that sample is the
   * one taken, and the document's time is when it was taken.
   */
  sample(now = Date.now(), opts: { oneShot?: boolean } = {}): Document {
    // The agents first: on a one-shot their directory, manifests and rings are read while NVML's
    // warm-up still runs on its thread; open() then waits for it.
    const agents = this.agents.refresh();
    this.lastAgents = agents;
    const own = ownPidNamespace();
    this.open();
    const samples: NvmlDeviceSample[] = [];
    if (this.nvml && this.system) {
      const n = this.system.device_count;
      const kept = opts.oneShot ? Array.from({ length: n }, (_, i) => this.nvml!.takeKept(i)) : [];
      if (n > 0 && kept.length === n && kept.every((k) => k !== null)) {
        for (const k of kept) samples.push(k!.sample);
        now = kept[0]!.time_unix_ms;
      } else {
        for (let i = 0; i < n; i++) samples.push(this.nvml.sample(i, { pcie: !opts.oneShot }));
      }
    }
    const nvmlPids = [...new Set(samples.flatMap((s) => s.processes.map((p) => p.pid)))];
    // Agents in another pid namespace (a container) are joined on /proc's NSpid and namespace of
    // the pids NVML lists (and of the host pid found before): read only where there is one.
    const inOther = agents.filter((a) => inOtherPidNamespace(a.manifest.pid_namespace, own));
    const procs = new Map<number, PidNsInfo>();
    if (inOther.length) {
      for (const pid of [...nvmlPids, ...inOther.flatMap((a) => (a.hostPid ? [a.hostPid] : []))]) if (!procs.has(pid)) procs.set(pid, pidNsInfo(pid));
    }
    const join = joinAgents({ devices: samples, agents, procs, ownPidNamespace: own });
    // Liveness of an agent in another namespace is its host pid's, once known (agents.ts).
    for (const a of inOther) {
      const hostPid = join.agents.get(a.pid)?.hostPid ?? null;
      if (hostPid !== null) a.hostPid = hostPid;
    }
    const infos = new Map<number, ProcessInfo>();
    // /proc is read by host pid: an agent's own pid names another process where it is not one.
    const agentPids = new Set(agents.flatMap((a) => join.agents.get(a.pid)?.hostPid ?? []));
    for (const pid of [...nvmlPids, ...agentPids]) if (!infos.has(pid)) infos.set(pid, processInfo(pid));
    for (const pid of agentPids) {
      const info = infos.get(pid)!;
      const last = this.lastInfo.get(pid);
      if (info.ppid !== null) this.lastInfo.set(pid, info);
      else if (last) infos.set(pid, last);
    }
    for (const pid of this.lastInfo.keys()) if (!agentPids.has(pid)) this.lastInfo.delete(pid);
    // CPU % is CPU time over wall time since the previous sample of the same pid.
    const cpu = new Map<number, { seconds: number; ms: number }>();
    for (const [pid, info] of infos) {
      const prev = this.previousCpu.get(pid);
      info.cpu_percent = cpuPercent(prev?.seconds, prev?.ms, info.cpu_seconds, now);
      if (info.cpu_seconds != null) cpu.set(pid, { seconds: info.cpu_seconds, ms: now });
    }
    this.previousCpu = cpu;
    const doc = buildDocument({
      time_unix_ms: now,
      host: hostname(),
      system: this.system,
      reason: this.reason ?? (this.system && this.system.device_count === 0 ? "NVML reports no devices" : null),
      samples,
      previous: this.previous,
      processInfo: infos,
      agents: agents.map((a) => ({ pid: a.pid, manifest: a.manifest, header: a.header, exited: a.exited })),
      join,
      warnings: [
        ...this.agents.problems,
        ...agents.filter((a) => a.problem && !a.exited).map((a) => `agent of pid ${a.pid}: ${a.problem}`),
      ],
    });
    this.previous = new Map(samples.map((s) => [s.index, s]));
    return doc;
  }

  /** `fast`: the process is about to exit, which releases NVML anyway (nvmlShutdown costs ~3 ms). */
  close(opts: { fast?: boolean } = {}): void {
    if (!opts.fast) this.nvml?.close();
    this.agents.close();
  }
}
