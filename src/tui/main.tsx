// Starting and ending the monitor: the alternate screen, a terminal that is always given back
// (q, Ctrl-C, SIGTERM, an uncaught error), the demo, replay, and `run`.
import { closeSync } from "node:fs";
import chalk from "chalk";
import { render } from "ink";
import type { Child } from "../collect/child";
import { startReplay } from "../collect/playback";
import type { Recording } from "../collect/recording";
import { DEMO_RECORDING, startDemo, type Demo } from "../collect/demo";
import type { ReplayClock } from "../profiler";
import type { Session } from "../collect/session";
import { readSnapshotFile, type Progress } from "../snapshot/read";
import { beforeNote, blockStacksOf, snapshotFacts, snapshotModel } from "../snapshot/view";
import { createPrivateTemp, removeOpened } from "../system/private-file";
import { formatBytes } from "../words";
import { useColor } from "./format";
import { App } from "./app";
import { keyHint, type ScreenId } from "./registry";
import { Controller } from "./controller";

export interface MonitorOptions {
  intervalMs: number;
  ascii: boolean;
  demo?: boolean;
  speed?: number;
  /** Where `d` writes snapshots (default: the directory the monitor was started in). */
  dumpDir?: string;
}

/** SGR mouse reports (clicks and the wheel, with coordinates past column 223), on and off. */
const MOUSE_ON = "\x1b[?1000h\x1b[?1006h";
const MOUSE_OFF = "\x1b[?1006l\x1b[?1000l";

/** The demo behind --demo and D (collect/demo.ts: what it plays), said on the status line.
 *  `clock`: the wall clock, unless a test gives its own. */
export function demoStarter(ctl: Controller, { speed, ring, clock }: { speed: number; ring: string; clock?: ReplayClock }) {
  let demo: Demo | null = null;
  return {
    start: () => {
      if (demo) return ctl.say(`the demo is already running: ${keyHint(["process"])} shows it`);
      try {
        // The replay feeds its model inside the monitor's ticks only; each tick draws once.
        demo = startDemo(ring, { speed, onUpdate: () => {}, clock: ctl.replayClock(clock) });
      } catch (e) {
        return ctl.say(`no demo: ${(e as Error).message}`);
      }
      ctl.replay = demo.handle.pm;
      ctl.replays.add(demo.handle);
      if (ctl.paused) demo.handle.pause(true);
      ctl.recorded = demo.machine;
      const screens: ScreenId[] = demo.machine ? ["overview", "process", "tensors", "segments"] : ["process", "tensors", "segments"];
      ctl.say(`demo: a training run recorded on ${demo.gpu ? `an ${demo.gpu}` : "a GPU"}, replayed at ${speed}× (${keyHint(screens)})`);
      void ctl.tick();
    },
    stop: () => demo?.handle.stop(),
  };
}

/** Ink colours through chalk, which turns itself off where CI is set (a shell inside a CI job on a
 *  GPU box): the finding's yellow and the selection's inverse would vanish. The monitor's rule is
 *  format.ts's: colours in a terminal unless NO_COLOR, FORCE_COLOR=0 or TERM=dumb say otherwise. */
function colourTheTerminal(env = process.env): void {
  if (chalk.level > 0 || !process.stdout.isTTY || !useColor) return;
  if (env.FORCE_COLOR !== undefined || env.TERM === "dumb") return;
  chalk.level = 1;
}

async function show(ctl: Controller, opts: MonitorOptions, extra: { initialScreen?: ScreenId; onDemo?: () => void; onExit?: () => void } = {}): Promise<void> {
  if (opts.dumpDir) ctl.snapshotDir = opts.dumpDir;
  colourTheTerminal();
  const ink = render(<App ctl={ctl} ascii={opts.ascii} initialScreen={extra.initialScreen} onDemo={extra.onDemo} />, {
    alternateScreen: true,
    // Ink would draw nothing until exit when CI=true is set (a shell inside a CI job on a GPU box);
    // a terminal is a terminal, whatever the environment says.
    interactive: Boolean(process.stdout.isTTY),
    incrementalRendering: process.env.GPUMEM_TUI_INCREMENTAL !== "0",
    maxFps: 20,
    exitOnCtrlC: false,
    patchConsole: true,
  });
  // The mouse is given back on every way out, like the terminal itself (a shell left reporting
  // clicks prints escape codes at every click).
  const mouse = (on: boolean) => process.stdout.isTTY && process.stdout.write(on ? MOUSE_ON : MOUSE_OFF);
  mouse(true);
  const quit = () => ink.unmount();
  const crash = (e: unknown) => {
    mouse(false);
    ink.unmount(); // the terminal first, then the words
    process.stderr.write(`gpumem-tui: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  };
  process.on("SIGTERM", quit);
  process.on("SIGHUP", quit);
  process.on("uncaughtException", crash);
  process.on("unhandledRejection", crash);
  try {
    await ink.waitUntilExit();
  } finally {
    mouse(false);
    process.off("SIGTERM", quit);
    process.off("SIGHUP", quit);
    process.off("uncaughtException", crash);
    process.off("unhandledRejection", crash);
    ctl.stop();
    extra.onExit?.();
  }
}

export async function runMonitor(session: Session, opts: MonitorOptions): Promise<number> {
  const ctl = new Controller(session, opts.intervalMs);
  const demo = demoStarter(ctl, { speed: opts.speed ?? 1, ring: DEMO_RECORDING });
  if (opts.demo) demo.start();
  ctl.start();
  // The demo opens on the Overview where it shows the recorded machine, else on its process.
  await show(ctl, opts, { initialScreen: opts.demo && !ctl.recorded ? "process" : "overview", onDemo: demo.start, onExit: demo.stop });
  return 0;
}

export async function runReplay(recording: Recording, opts: MonitorOptions): Promise<number> {
  const ctl = new Controller(null, opts.intervalMs);
  const r = startReplay(recording, { speed: opts.speed ?? 1, onUpdate: () => {}, clock: ctl.replayClock() });
  ctl.replay = r.pm;
  ctl.replays.add(r);
  ctl.status = [`replay of ${recording.path} at ${opts.speed ?? 1}×`, ...recording.notes].join("; ");
  // The ticks feed the replay and draw it, once an interval.
  ctl.start();
  await show(ctl, opts, { initialScreen: "process", onExit: r.stop });
  return 0;
}

/** `view FILE`: a snapshot's trace through the model at full speed, then its segments as they were
 * at the end. It opens on Process, which answers most at once (its totals, its memory over the
 * recording, its findings); the frame's header says what the file is (tui/snapshot-header.ts). */
export async function runView(path: string, opts: MonitorOptions & { progress?: Progress }): Promise<number> {
  const ctl = await viewController(path, opts);
  await show(ctl, opts, { initialScreen: VIEW_SCREEN });
  return 0;
}

/** The screen `view FILE` opens on. */
export const VIEW_SCREEN: ScreenId = "process";

/** The screens' store for `view FILE`, read and played (what runView shows; tests draw it). */
export async function viewController(path: string, opts: { intervalMs: number; progress?: Progress }): Promise<Controller> {
  const parsed = await readSnapshotFile(path, opts.progress);
  const { model, replay } = snapshotModel(parsed, { keepTrace: true, resync: true });
  const ctl = new Controller(null, opts.intervalMs);
  ctl.replay = { pid: 0, model, source: "replay", socket: null, title: `snapshot ${path}`, ended: true, snapshot: snapshotFacts(path, parsed, replay, model) };
  const note = beforeNote(replay, formatBytes);
  ctl.status = [`${keyHint(["tensors", "segments", "timeline"])} show what it holds`, ...(note ? [note] : [])].join("; ");
  return ctl;
}

/** `run -- CMD`: the program's output goes to a log (the monitor has the terminal). The log is a
 *  new file of an unguessable name in $TMPDIR, 0600, never one planted there or reached through a
 *  link (system/private-file.ts): it holds what the program prints. */
export async function runMonitorOnChild(opts: MonitorOptions & { rest: string[] }, start: (argv: string[], stdio: Parameters<typeof import("../collect/child").startChild>[1]) => Child, session: Session): Promise<number> {
  const { path: log, fd } = createPrivateTemp(`gpumem-tui-run-${process.pid}-`, ".log");
  let child: Child;
  try {
    child = start(opts.rest, { stdin: "ignore", stdout: fd, stderr: fd });
  } catch (e) {
    removeOpened(log, fd); // the program never ran: an empty log would only mislead
    closeSync(fd);
    throw e;
  }
  const ctl = new Controller(session, opts.intervalMs);
  ctl.status = `pid ${child.pid}: ${opts.rest.join(" ")} (output: ${log})`;
  let code: number | null = null;
  void child.exited.then((c) => {
    code = c;
    // The log on a line of its own: the status line keeps a path whole (statusLine, messageLines).
    ctl.say(`pid ${child.pid} exited with status ${c} (q quits); its output is in\n${log}`);
  });
  ctl.start();
  await show(ctl, opts);
  session.close();
  if (code === null) process.stderr.write(`gpumem-tui: monitor closed; waiting for pid ${child.pid} (Ctrl-C stops it); output: ${log}\n`);
  const result = await child.exited;
  closeSync(fd);
  return result;
}
