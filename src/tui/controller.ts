// What the screens show, kept up to date: ticks the sampling session on an interval (never on the
// path that handles keys; the session feeds the models and keeps the histories), and runs the
// agent commands behind d / e / r and the signals behind k. Views read it; they never call NVML,
// sockets or signals.
import { join, resolve } from "node:path";
import { existsSync } from "node:fs";
import { ask } from "../collect/control";
import { LiveModels, type ProcessModel } from "../collect/live";
import type { ReplayHandle } from "../collect/playback";
import { signalProcess, stillRunning, type StopSignal } from "../collect/signal";
import { Session, type DeviceHistory } from "../collect/session";
import type { SystemCollector } from "../collect/system";
import type { RecordedMachine } from "../collect/demo";
import { withRecorded } from "../system/recorded";
import type { Document } from "../system/schema";
import { writeModelSnapshot } from "../snapshot/write";
import { formatBytes } from "./format";

export type { DeviceHistory };

const MEMORY_VIZ = "open it at https://pytorch.org/memory_viz (drag the file onto the page)";

export class Controller {
  doc: Document | null = null;
  /** The sampling session (null without a machine to sample: replays, tests). */
  readonly session: Session | null;
  /** The session's models, or the controller's own where there is no session. */
  readonly models: LiveModels;
  readonly history: Map<number, DeviceHistory>;
  replay: ProcessModel | null = null;
  /** The replays running (the demo, replay FILE): a pause stops them too. */
  readonly replays = new Set<ReplayHandle>();
  private pausedNow = false;
  /** What the status line says; a line break starts a line of its own (a path shown whole). */
  status = "";
  busy = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly listeners = new Set<() => void>();
  version = 0;
  /** Where `d` writes snapshots: the directory the monitor was started in, or --dump-dir. */
  snapshotDir = process.cwd();

  constructor(
    readonly collector: SystemCollector | null,
    public intervalMs: number,
  ) {
    this.session = collector ? new Session(collector, { keepTrace: true }) : null;
    this.models = this.session?.models ?? new LiveModels();
    this.history = this.session?.history ?? new Map();
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  notify(): void {
    this.version++;
    for (const fn of this.listeners) fn();
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

  start(): void {
    const loop = () => {
      if (!this.pausedNow) this.tick();
      this.timer = setTimeout(loop, this.intervalMs);
    };
    loop();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The machine a demo recording was made on, shown beside this one's (null: no demo). */
  recorded: RecordedMachine | null = null;

  /** What the Overview shows: the machine's document, and a recorded machine's beside it. */
  overview(): { doc: Document | null; history: Map<number, DeviceHistory> } {
    const rec = this.recorded?.doc;
    if (!rec) return { doc: this.doc, history: this.history };
    const { doc, index } = withRecorded(this.doc, rec);
    const history = new Map(this.history);
    for (const [i, h] of this.recorded!.history) history.set(index(i), h);
    return { doc, history };
  }

  tick(now = Date.now()): void {
    this.recorded?.tick();
    if (!this.session) return this.notify();
    try {
      this.doc = this.session.tick(now);
    } catch (e) {
      this.status = `sampling failed: ${(e as Error).message}`;
    }
    this.notify();
  }

  setInterval(ms: number): void {
    this.intervalMs = Math.max(100, Math.min(10_000, ms));
    this.status = `interval ${this.intervalMs} ms`;
    this.notify();
  }

  /** Every process the screens can open: agents' models first, then a replay. */
  processModels(): ProcessModel[] {
    const out = [...this.models.byPid.values()];
    if (this.replay) out.unshift(this.replay);
    return out;
  }

  /** Run an agent command without blocking the screen; its outcome lands in the status line. */
  async run(pm: ProcessModel | undefined, cmd: "dump_snapshot" | "empty_cache" | "reset_peaks"): Promise<void> {
    if (!pm) return this.say("select a process with the agent first (Overview: ↑ ↓, Enter)");
    if (cmd === "dump_snapshot") return this.dump(pm);
    if (!pm.socket) return this.say(`${cmd}: pid ${pm.pid} ${pm.source === "replay" ? "is a replay" : "has no control socket"}: there is no process to ask`);
    if (pm.ended) return this.say(`${cmd}: pid ${pm.pid} has exited`);
    if (this.busy) return this.say("a command is still running");
    this.busy = true;
    this.say(`${cmd}: asking pid ${pm.pid}…`);
    if (cmd === "reset_peaks") {
      const r = await ask(pm.socket, cmd, {});
      this.busy = false;
      return this.say(r.ok ? `peaks reset for pid ${pm.pid}` : `${cmd} failed: ${r.error}`);
    }
    const r = await ask(pm.socket, cmd, {});
    this.busy = false;
    if (!r.ok) return this.say(`${cmd} failed: ${r.error}`);
    const before = r.reply.reserved_before.reduce((a, b) => a + b, 0);
    const after = r.reply.reserved_after.reduce((a, b) => a + b, 0);
    this.say(`empty_cache released ${formatBytes(before - after)} (reserved ${formatBytes(before)} → ${formatBytes(after)})`);
  }

  /** `a`: start the agent in a running PyTorch process (`gpumem-tui attach`); its outcome, refusals
   *  with their remedy included, lands in the status line, and the process is then read like any. */
  async attach(pid: number, label: string): Promise<void> {
    if (this.busy) return this.say("a command is still running");
    this.busy = true;
    this.say(`attaching to ${label}…`);
    try {
      const { attachProcess } = await import("../attach/attach");
      // This monitor owns the attach: the agent detaches when it exits.
      const r = await attachProcess(pid, { timeoutS: 10, wait: false, owned: true, say: (line) => this.say(line) });
      this.say(r.line);
    } catch (e) {
      this.say(`attach ${pid} failed: ${(e as Error).message}`);
    } finally {
      this.busy = false;
    }
  }

  /**
   * `d`: one snapshot. The agent's own (torch's, with its trace and stacks), written where the
   * monitor writes, where a live agent records memory history; otherwise the monitor's, from its
   * own events (a replay, an exited process, an agent that failed, or one without history: torch's
   * file would have segments and no trace, so the agent is asked `only_with_trace` and writes
   * nothing). The path gets a line of its own.
   */
  private async dump(pm: ProcessModel): Promise<void> {
    const dir = resolve(this.snapshotDir);
    const own = (why: string) => {
      try {
        const f = writeModelSnapshot(pm.model, dir, pm.pid);
        const notes = [why, ...f.notes].filter(Boolean).map((n) => `(${n})`).join(" ");
        return `snapshot of pid ${pm.pid}: ${formatBytes(f.size)}, ${f.trace_entries} trace entries from the monitor's events ${notes}\n${f.path}\n${MEMORY_VIZ}`;
      } catch (e) {
        return `writing a snapshot into ${dir} failed: ${(e as Error).message}${why ? ` (${why})` : ""}`;
      }
    };
    // Writing takes a moment for a long trace (100,000 entries: ~0.1-0.3 s): say so first.
    const ownLater = async (why: string) => {
      this.say(`writing a snapshot from the monitor's events${why ? ` (${why})` : ""}…`);
      await new Promise((r) => setTimeout(r, 0));
      this.say(own(why));
    };
    if (!pm.socket || pm.ended) return ownLater(pm.ended && pm.socket ? `pid ${pm.pid} has exited` : "");
    if (this.busy) return this.say("a command is still running");
    this.busy = true;
    this.say(`dump_snapshot: asking pid ${pm.pid}…`);
    const path = join(dir, `${pm.pid}-snapshot-${Date.now()}.pickle`);
    const a = await ask(pm.socket, "dump_snapshot", { path, only_with_trace: true });
    this.busy = false;
    if (!a.ok) return ownLater(`the agent's dump failed: ${a.error}`);
    const r = a.reply;
    if (r.path === null || r.size === null) return ownLater("the agent records no memory history");
    // An agent in another container writes into its own filesystem: the path may not exist here.
    const where = existsSync(r.path) ? "" : " (written in the process's own filesystem: another container?)";
    this.say(`snapshot of pid ${pm.pid} by its agent: ${formatBytes(r.size)}${where}\n${r.path}\n${MEMORY_VIZ}`);
  }

  /** `k`: stop a process with SIGTERM or SIGKILL; a second later, whether it has gone. */
  kill(pid: number, signal: StopSignal, commandLine: string | null): void {
    const r = signalProcess(pid, signal, { command: commandLine });
    this.say(r.message);
    if (!r.ok) return;
    setTimeout(() => {
      if (this.status !== r.message) return; // another message came since
      this.say(stillRunning(pid) ? `pid ${pid} still runs 1 s after ${signal}${signal === "SIGTERM" ? " (k, then 9 for SIGKILL)" : ""}` : `pid ${pid} has stopped (${signal})`);
    }, 1000).unref?.();
  }

  say(msg: string): void {
    this.status = msg;
    this.notify();
  }
}
