// The machine, sampled: NVML for every device, /proc for every process, the agents'
// ring headers. The only place that calls NVML on a schedule; views get the Document.
import { hostname } from "node:os";
import { Nvml, NvmlError, type NvmlDeviceSample, type NvmlSystem } from "../ffi/nvml";
import { NativeLibraryError } from "../ffi/lib";
import { buildDocument, type DocumentInput } from "../system/document";
import type { Document } from "../system/schema";
import { type Agent, AgentWatcher } from "./agents";
import { DearQueries } from "./dear-queries";
import { joinAgents } from "../system/join";
import { cpuPercent, type PidNsInfo, type ProcessInfo } from "../system/process";
import { inNestedPidNamespace, inOtherPidNamespace, ownPidNamespace, ownUser, pidNsInfo, processInfo } from "./procfs";

export class Machine {
  private nvml: Nvml | null = null;
  private system: NvmlSystem | null = null;
  private reason: string | null = null;
  /** Each process's SM share and the PCIe counters, read every few seconds (dear-queries.ts). */
  private readonly dear = new DearQueries();
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

  /** The document of one sample (read()), with no model's detail: the sampling session
   *  (session.ts) builds it with its models' profiles. */
  sample(now = Date.now(), opts: { oneShot?: boolean } = {}): Document {
    return buildDocument(this.read(now, opts));
  }

  /**
   * One sample's facts, as of `now`: what the document is built of. `oneShot`: a single sample
   * (`--json --once`): no rates can come of it, so none are read, and where the warm-up kept its own
   * sample of every device that sample is the one taken, and the document's time is when it was taken.
   */
  read(now = Date.now(), opts: { oneShot?: boolean } = {}): DocumentInput {
    // The agents first: on a one-shot their directory, manifests and rings are read while NVML's
    // warm-up still runs on its thread; open() then waits for it.
    const agents = this.agents.refresh();
    this.lastAgents = agents;
    const own = ownPidNamespace();
    // A one-shot's first part: the warm-up publishes identity, memory and the process lists of its
    // sample before the calls whose first call is slow (~9 ms on an H100). /proc is read for those
    // processes and the document is built from that part meanwhile; the same work on the whole
    // sample, after the wait, is then a merge of what is already read, on code already run.
    let known: Map<number, ProcessInfo> | undefined;
    if (opts.oneShot && !this.opened) {
      const early = Nvml.early();
      if (early) {
        const first = this.gather(early.time_unix_ms, early.system, early.samples, new Map(), agents, own);
        buildDocument(first.input); // let go: what it is for is the code it has run
        known = first.infos;
      }
    }
    this.open();
    const samples: NvmlDeviceSample[] = [];
    /** Each device's sample its PCIe rate is measured from (the counters' read before the last). */
    const rateFrom = new Map<number, NvmlDeviceSample>();
    if (this.nvml && this.system) {
      const n = this.system.device_count;
      const kept = opts.oneShot ? Array.from({ length: n }, (_, i) => this.nvml!.takeKept(i)) : [];
      if (n > 0 && kept.length === n && kept.every((k) => k !== null)) {
        for (const k of kept) samples.push(k!.sample);
        now = kept[0]!.time_unix_ms;
      } else if (opts.oneShot) {
        for (let i = 0; i < n; i++) samples.push(this.nvml.sample(i, { pcie: false }));
      } else {
        for (let i = 0; i < n; i++) {
          const asked = this.dear.ask(i, now);
          const s = this.nvml.sample(i, asked);
          const from = this.dear.settle(s, now, asked);
          if (from) rateFrom.set(i, from);
          samples.push(s);
        }
        this.dear.keepOnly(n);
      }
    }
    const { input, infos, join, inOther, agentPids } = this.gather(now, this.system, samples, rateFrom, agents, own, known);
    // What the next sample starts from: each agent's host pid, /proc's last word on it, CPU times.
    for (const a of inOther) {
      const hostPid = join.agents.get(a.pid)?.hostPid ?? null;
      if (hostPid !== null) a.hostPid = hostPid; // liveness of an agent in another namespace (agents.ts)
    }
    for (const pid of agentPids) if (infos.get(pid)!.ppid !== null) this.lastInfo.set(pid, infos.get(pid)!);
    for (const pid of this.lastInfo.keys()) if (!agentPids.has(pid)) this.lastInfo.delete(pid);
    this.previousCpu = new Map([...infos].flatMap(([pid, i]) => (i.cpu_seconds != null ? [[pid, { seconds: i.cpu_seconds, ms: now }]] : [])));
    return input;
  }

  /** The facts of these samples, with what /proc says of their processes (`known`: read already,
   *  by pid; `rateFrom`: each device's sample its PCIe rate is measured from). Changes nothing:
   *  read() keeps what the next sample starts from. */
  private gather(now: number, system: NvmlSystem | null, samples: NvmlDeviceSample[], rateFrom: Map<number, NvmlDeviceSample>, agents: Agent[], own: number | null, known?: Map<number, ProcessInfo>) {
    const nvmlPids = [...new Set(samples.flatMap((s) => s.processes.map((p) => p.pid)))];
    // Agents in another pid namespace (a container) are joined on /proc's NSpid and namespace of
    // the pids NVML lists (and of the host pid found before): read only where there is one.
    const inOther = agents.filter((a) => inOtherPidNamespace(a.manifest.pid_namespace, own));
    const procs = new Map<number, PidNsInfo>();
    if (inOther.length) {
      for (const pid of [...nvmlPids, ...inOther.flatMap((a) => (a.hostPid ? [a.hostPid] : []))]) if (!procs.has(pid)) procs.set(pid, pidNsInfo(pid));
    }
    const join = joinAgents({ devices: samples, agents, procs, ownPidNamespace: own });
    const infos = new Map<number, ProcessInfo>();
    // /proc is read by host pid: an agent's own pid names another process where it is not one.
    const agentPids = new Set(agents.flatMap((a) => join.agents.get(a.pid)?.hostPid ?? []));
    for (const pid of [...nvmlPids, ...agentPids]) if (!infos.has(pid)) infos.set(pid, known?.get(pid) ?? processInfo(pid));
    // An exited agent process keeps what /proc said of it while it ran.
    for (const pid of agentPids) if (infos.get(pid)!.ppid === null && this.lastInfo.has(pid)) infos.set(pid, this.lastInfo.get(pid)!);
    // CPU % is CPU time over wall time since the previous sample of the same pid.
    for (const [pid, info] of infos) {
      const prev = this.previousCpu.get(pid);
      info.cpu_percent = cpuPercent(prev?.seconds, prev?.ms, info.cpu_seconds, now);
    }
    const input: DocumentInput = {
      time_unix_ms: now,
      host: hostname(),
      user: ownUser(),
      containerView: inNestedPidNamespace(own),
      system,
      reason: this.reason ?? (system && system.device_count === 0 ? "NVML reports no devices" : null),
      samples,
      rateFrom,
      processInfo: infos,
      agents: agents.map((a) => ({ pid: a.pid, manifest: a.manifest, header: a.header, exited: a.exited })),
      join,
      warnings: [
        ...this.agents.problems,
        ...agents.filter((a) => a.problem && !a.exited).map((a) => `agent of pid ${a.pid}: ${a.problem}`),
      ],
    };
    return { input, infos, join, inOther, agentPids };
  }

  /** NVML's used bytes of host pid `pid` on device `index` now, from the quick part of a sample
   *  alone (the next sample's rates untouched): the ledger's sample at a library mark. null where
   *  NVML is not open or does not list the pid. */
  usedNow(index: number, pid: number): number | null {
    if (!this.nvml) return null;
    try {
      return this.nvml.processes(index).processes.find((p) => p.pid === pid)?.used_bytes ?? null;
    } catch {
      return null; // the next full sample says what NVML refused
    }
  }

  /** `fast`: the process is about to exit, which releases NVML anyway (nvmlShutdown costs ~3 ms). */
  close(opts: { fast?: boolean } = {}): void {
    if (!opts.fast) this.nvml?.close();
    this.agents.close();
  }
}
