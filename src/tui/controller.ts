// The store the screens draw: one state a tick (the machine's document with NVML, every agent's
// model, each process's findings computed once), so that every screen drawn between two ticks
// shows the same moment. A tick samples the session (live agents' rings are read there) and lets
// the replays feed up to the tick's moment (collect/tick-gate.ts), then draws once. What the
// agents are asked (d / e / r) and the signals behind k are the collecting layer's
// (collect/actions.ts), an attach (a) is src/attach's; their plain results land in the status line. Views never call NVML, sockets or
// signals, and never sample.
import { LiveModels, type ProcessModel } from "../collect/live";
import { attachProcess } from "../attach/attach";
import { agentCommand, dumpSnapshot, stopProcess, type ActionResult, type AgentCommand } from "../collect/actions";
import { wallClock, type ReplayHandle } from "../collect/playback";
import type { StopSignal } from "../collect/signal";
import type { Session, DeviceHistory } from "../collect/session";
import { replayedPytorch, type RecordedMachine } from "../collect/demo";
import { TickGate } from "../collect/tick-gate";
import { distinctFindings, findings, type FindingGroup, type ReplayClock } from "../profiler";
import { withRecorded } from "../system/recorded";
import type { Document, Process } from "../system/schema";
import { SCHEMA_VERSION } from "../system/version";
import { gpuFindingWords } from "./screens/held-memory";

export type { DeviceHistory };

/** Why the screen may need drawing again (Controller.notify). */
export type Redraw = "tick" | "change";

/** The sampling intervals `+` and `-` step through (ms): each reached again from either side. */
export const INTERVALS = [250, 500, 1000, 2000, 5000] as const;

/** The interval one step up (`dir` 1) or down (-1) the ladder from `ms`; an interval off the ladder
 *  (--interval 300) goes to the nearest rung that way; past either end it stays. */
export function nextInterval(ms: number, dir: 1 | -1): number {
  const up = INTERVALS.find((v) => v > ms);
  const down = INTERVALS.findLast((v) => v < ms);
  return (dir > 0 ? up : down) ?? ms;
}

/** Up to this many running agents the screens read every ring; past it, only the ring of the
 *  process they show in detail (Controller.focus): many busy ranks nobody looks at are shown with
 *  their ring headers' figures, said on the frame. */
export const FOLLOW_ALL_UP_TO = 2;

/** How far the resident set may grow past the last full collection before the next (collectGarbage). */
const GC_GROWTH_BYTES = 48 * 2 ** 20;

/** One moment, as every screen draws it. */
export interface ScreenState {
  /** The Overview's document: this machine's, with a recorded machine's (the demo's) beside it. */
  doc: Document | null;
  history: Map<number, DeviceHistory>;
  /** Every process the screens can open: a replay first, then the agents' processes. */
  processes: ProcessModel[];
  /** Each process's findings (by pid), each once by its title. */
  findings: Map<number, FindingGroup[]>;
  /** Each process's most severe finding that asks for attention (a warning or an error), by pid:
   *  the mark on its Overview row. Info findings (memory outside PyTorch: the CUDA context of every
   *  process) mark nothing, or every row would be marked. */
  alerts: Map<number, FindingGroup>;
  /** How many findings ask for attention, over every process (the header's count). */
  alertCount: number;
  /** The processes whose rings were left unread this tick (FOLLOW_ALL_UP_TO), for the header. */
  unread: number;
}

const SEVERITY_RANK = { error: 0, warning: 1, info: 2 } as const;

/** The more severe of two findings (the first where they are alike). */
export function moreSevere<T extends { severity: keyof typeof SEVERITY_RANK }>(a: T | null | undefined, b: T | null | undefined): T | null {
  if (!a || !b) return a ?? b ?? null;
  return SEVERITY_RANK[b.severity] < SEVERITY_RANK[a.severity] ? b : a;
}

/** The finding that marks an Overview row: its agent's process's (a row without an agent has none). */
export function rowAlert(state: ScreenState, p: Process): FindingGroup | null {
  return p.agent_pid === null ? null : (state.alerts.get(p.agent_pid) ?? null);
}

/**
 * The replayed process as a row of the Overview, where no recorded machine gives it one (`replay
 * FILE`, a demo without an NVML track): its PyTorch figures at the replay's moment, what NVML would
 * say unknown, marked recorded (it runs on no GPU here: nothing to stop or attach to). A snapshot
 * (`view FILE`) is a file, not a process, and has no row.
 */
function replayRow(pm: ProcessModel): Process | null {
  const pytorch = pm.pid > 0 && !pm.snapshot ? replayedPytorch(pm.model, null) : null;
  if (!pytorch) return null;
  return {
    pid: pm.pid,
    agent_pid: pm.pid,
    pid_namespace: null,
    device: pytorch.device,
    kind: "compute",
    used_bytes: null,
    user: null,
    name: null,
    command: pm.command ?? pm.title,
    pytorch,
    gpu_sm_percent: null,
    cpu_percent: null,
    host_memory_bytes: null,
    run_time_seconds: null,
    nvml_visible: false,
    // Marked recorded already: "[exited]" would take COMMAND's room to say the same.
    exited: false,
    recorded: true,
  };
}

/** The machine's document with the replay's row among its processes (no machine: a document of it alone). */
function withReplayRow(doc: Document | null, row: Process): Document {
  if (doc) return { ...doc, processes: [...doc.processes, row] };
  return { version: SCHEMA_VERSION, time_unix_ms: 0, host: "", driver_version: null, nvml_version: null, cuda_driver_version: null, reason: "this mode samples no GPUs", devices: [], processes: [row], jobs: [], warnings: [] };
}

export class Controller {
  /** The sampling session (null without a machine to sample: replays, tests). */
  readonly session: Session | null;
  /** The session's models, or the controller's own where there is no session. */
  readonly models: LiveModels;
  readonly history: Map<number, DeviceHistory>;
  /** The replays running (the demo, replay FILE): a pause stops them too. */
  readonly replays = new Set<ReplayHandle>();
  private readonly gates = new Set<TickGate>();
  private pausedNow = false;
  private statusNow = "";
  /** When the status line's message was said (Date.now()): a message shows for MESSAGE_MS, then
   *  the key hint comes back (src/tui/app.tsx). */
  statusAt = 0;
  busy = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running = false;
  private readonly listeners = new Set<(why: Redraw) => void>();
  version = 0;
  /** Ticks done (a screen's redraws are counted against them in the tests). */
  ticks = 0;
  /** The process the screens show in detail (the per-process screens' process, which the frame
   *  sets as it draws): where many agents run, the only ring read (FOLLOW_ALL_UP_TO). */
  focus: number | null = null;
  /** Where `d` writes snapshots: the directory the monitor was started in, or --dump-dir. */
  snapshotDir = process.cwd();
  private docNow: Document | null = null;
  private replayNow: ProcessModel | null = null;
  private recordedNow: RecordedMachine | null = null;
  private stateNow: ScreenState | null = null;
  private rssAfterGc = 0;

  constructor(
    /** The sampling session, made by the command (null: none, for replays and tests). */
    session: Session | null,
    public intervalMs: number,
  ) {
    this.session = session;
    this.models = this.session?.models ?? new LiveModels();
    this.history = this.session?.history ?? new Map();
  }

  /** The machine's document of the last tick. Set by hand (tests, a front end), the state is made
   *  again from it on its next read. */
  get doc(): Document | null {
    return this.docNow;
  }
  set doc(d: Document | null) {
    this.docNow = d;
    this.stateNow = null;
  }
  /** A replayed process (the demo, replay FILE, view FILE). */
  get replay(): ProcessModel | null {
    return this.replayNow;
  }
  set replay(pm: ProcessModel | null) {
    this.replayNow = pm;
    this.stateNow = null;
  }
  /** The machine a demo recording was made on, shown beside this one's (null: no demo). */
  get recorded(): RecordedMachine | null {
    return this.recordedNow;
  }
  set recorded(r: RecordedMachine | null) {
    this.recordedNow = r;
    this.stateNow = null;
  }

  /** What every screen draws: the last tick's state (made now where none was made since a change by hand). */
  get state(): ScreenState {
    return (this.stateNow ??= this.makeState());
  }

  private makeState(): ScreenState {
    const processes = [...this.models.byPid.values()];
    if (this.replayNow) processes.unshift(this.replayNow);
    const found = new Map<number, FindingGroup[]>();
    const alerts = new Map<number, FindingGroup>();
    let alertCount = 0;
    for (const pm of processes) {
      const fs = distinctFindings(pm.found ?? findings(pm.model));
      found.set(pm.pid, fs);
      const attention = fs.filter((f) => f.severity !== "info");
      alertCount += attention.length;
      const worst = attention.reduce<FindingGroup | null>(moreSevere, null);
      if (worst) alerts.set(pm.pid, worst);
    }
    // A GPU's memory held by a gone pid asks for attention too (screens/held-memory): counted.
    alertCount += gpuFindingWords(this.docNow).length;
    const marks = { findings: found, alerts, alertCount, unread: processes.filter((pm) => pm.unread).length };
    const rec = this.recordedNow?.doc;
    if (!rec) {
      const row = this.replayNow ? replayRow(this.replayNow) : null;
      return { doc: row ? withReplayRow(this.docNow, row) : this.docNow, history: this.history, processes, ...marks };
    }
    const { doc, index } = withRecorded(this.docNow, rec);
    const history = new Map(this.history);
    for (const [i, h] of this.recordedNow!.history) history.set(index(i), h);
    return { doc, history, processes, ...marks };
  }

  subscribe(fn: (why: Redraw) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The screen is drawn again: "tick" for a tick's new state (the frame draws it only where what
   *  the screen shows changed: src/tui/drawn.ts), "change" for anything else (a message, the
   *  interval, a pause, a demo started), always drawn. */
  notify(why: Redraw = "change"): void {
    this.version++;
    for (const fn of this.listeners) fn(why);
  }

  /** What the status line says; a line break parts a path from the sentence before it. */
  get status(): string {
    return this.statusNow;
  }
  set status(s: string) {
    this.statusNow = s;
    this.statusAt = Date.now();
  }

  get paused(): boolean {
    return this.pausedNow;
  }

  /**
   * Pause: no sampling, no event read into any model, and every replay's clock stopped; resuming
   * goes on from where it stopped. The status line keeps its PAUSED mark until then.
   */
  setPaused(on: boolean): void {
    this.pausedNow = on;
    for (const r of this.replays) r.pause(on);
    this.say(on ? "paused: nothing is read until space or p resumes" : "resumed");
  }

  /** The clock to give a replay (`base`: the wall, or a test's): its waits end only at a tick, so
   *  its model changes only inside one. */
  replayClock(base: ReplayClock = wallClock): ReplayClock {
    const gate = new TickGate(base);
    this.gates.add(gate);
    return gate.clock;
  }

  /** Ticks every interval (the next one counted from the end of the last) until `stop`. */
  start(): void {
    this.running = true;
    const loop = async () => {
      if (!this.pausedNow) {
        await this.tick();
        this.collectGarbage();
      }
      if (this.running) this.timer = setTimeout(loop, this.intervalMs);
    };
    void loop();
  }

  /**
   * A full collection once the resident set has grown GC_GROWTH_BYTES since the last: the engine
   * otherwise lets the ticks' garbage (replayed states, findings, drawings; the live heap of the
   * demo is ~15 MB) pile up to ~230 MB before it collects. One collection each tick would cost
   * ~1.6% of a core on the demo; this costs a collection every few ticks (bench/tui-process-screen.ts).
   */
  private collectGarbage(): void {
    const rss = process.memoryUsage.rss();
    if (rss - this.rssAfterGc < GC_GROWTH_BYTES) return;
    Bun.gc(true);
    this.rssAfterGc = process.memoryUsage.rss();
  }

  stop(): void {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One tick: the replays fed up to now, the machine sampled, the state made once, one redraw. */
  async tick(now = Date.now()): Promise<void> {
    for (const g of this.gates) await g.tick();
    this.recordedNow?.tick();
    if (this.session) {
      try {
        this.docNow = this.session.tick(now, { follow: this.follow(this.session) });
      } catch (e) {
        this.status = `sampling failed: ${(e as Error).message}`;
      }
    }
    this.stateNow = this.makeState();
    this.ticks++;
    this.notify("tick");
  }

  /** The rings a tick reads: every one up to FOLLOW_ALL_UP_TO running agents (as the last sample
   *  found them) or where no frame says which process it shows, else the focus's alone. */
  private follow(session: Session): ReadonlySet<number> | null {
    const running = session.machine.lastAgents.filter((a) => !a.exited).length;
    return running <= FOLLOW_ALL_UP_TO || this.focus === null ? null : new Set([this.focus]);
  }

  setInterval(ms: number): void {
    this.intervalMs = Math.max(100, Math.min(10_000, ms));
    this.status = `interval ${this.intervalMs} ms`;
    this.notify();
  }

  /** `+` / `-`: the next interval of the ladder (INTERVALS); at its end, said so. */
  stepInterval(dir: 1 | -1): void {
    const next = nextInterval(this.intervalMs, dir);
    if (next !== this.intervalMs) return this.setInterval(next);
    this.say(`interval ${this.intervalMs} ms: the ${dir > 0 ? "longest + gives" : "shortest - gives"} (${INTERVALS.join(", ")} ms)`);
  }

  /** What the Overview shows: the machine's document, and a recorded machine's beside it. */
  overview(): { doc: Document | null; history: Map<number, DeviceHistory> } {
    return this.state;
  }

  /** Every process the screens can open: a replay first, then agents' models. */
  processModels(): ProcessModel[] {
    return this.state.processes;
  }

  /** One action at a time, its progress and outcome on the status line. */
  private async act(action: () => Promise<ActionResult>): Promise<void> {
    if (this.busy) return this.say("a command is still running");
    this.busy = true;
    try {
      this.say((await action()).message);
    } finally {
      this.busy = false;
    }
  }

  /** d / e / r on a process (the agent's, or the monitor's own snapshot where there is no agent to ask). */
  async run(pm: ProcessModel | undefined, cmd: AgentCommand): Promise<void> {
    if (!pm) return this.say("select a process with the agent first (Overview: ↑ ↓, Enter)");
    const say = (line: string) => this.say(line);
    if (cmd === "dump_snapshot") return this.act(() => dumpSnapshot(pm, this.snapshotDir, say));
    return this.act(() => agentCommand(pm, cmd, say));
  }

  /** `a`: the agent started in a running PyTorch process (src/attach), owned by this monitor (it
   *  detaches when the monitor exits); refusals come with their remedy. It is then read like any. */
  async attach(pid: number, label: string): Promise<void> {
    return this.act(async () => {
      this.say(`attaching to ${label}…`);
      try {
        const r = await attachProcess(pid, { timeoutS: 10, wait: false, owned: true, say: (line) => this.say(line) });
        return { ok: r.ok, message: r.line };
      } catch (e) {
        return { ok: false, message: `attach ${pid} failed: ${(e as Error).message}` };
      }
    });
  }

  /** `k`: SIGTERM or SIGKILL; a second later, whether it has gone (unless another message came since). */
  kill(pid: number, signal: StopSignal, commandLine: string | null): void {
    const r = stopProcess(pid, signal, commandLine, (later) => {
      if (this.status === r.message) this.say(later.message);
    });
    this.say(r.message);
  }

  say(msg: string): void {
    this.status = msg;
    this.notify();
  }
}
