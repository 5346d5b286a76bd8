// Starting and ending the monitor: the alternate screen, a terminal that is always given back
// (q, Ctrl-C, SIGTERM, an uncaught error), the demo, replay, and `run`.
import { closeSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink";
import type { Child } from "../collect/child";
import { startReplay } from "../collect/live";
import { ROOT } from "../root";
import { openRingRecording, type Recording } from "../collect/recording";
import { SystemCollector } from "../collect/system";
import { App } from "./app";
import { Controller } from "./controller";

export interface MonitorOptions {
  intervalMs: number;
  ascii: boolean;
  demo?: boolean;
  speed?: number;
}

/** The recording the demo replays: a real training run recorded on an H100, shipped in the package. */
export const DEMO_RECORDING = join(ROOT, "test", "fixtures", "normal.ring");

async function show(ctl: Controller, opts: MonitorOptions, extra: { initialScreen?: number; onDemo?: () => void; onExit?: () => void } = {}): Promise<void> {
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
  const quit = () => ink.unmount();
  const crash = (e: unknown) => {
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
    process.off("SIGTERM", quit);
    process.off("SIGHUP", quit);
    process.off("uncaughtException", crash);
    process.off("unhandledRejection", crash);
    ctl.stop();
    extra.onExit?.();
  }
}

function demoStarter(ctl: Controller, speed: number) {
  let handle: ReturnType<typeof startReplay> | null = null;
  return {
    start: () => {
      if (handle) return ctl.say("the demo is already running: 2 shows it");
      let rec: Recording;
      try {
        rec = openRingRecording(DEMO_RECORDING);
      } catch (e) {
        return ctl.say(`no demo: ${(e as Error).message}`);
      }
      handle = startReplay(rec, { speed, onUpdate: () => ctl.notify(), loop: () => openRingRecording(DEMO_RECORDING), maxIdleMs: 1000 });
      ctl.replay = handle.pm;
      ctl.say(`demo: a training run recorded on an H100, replayed at ${speed}×, idle stretches cut to 1 s (2 Process, 3 Tensors, 4 Segments)`);
    },
    stop: () => handle?.stop(),
  };
}

export async function runMonitor(collector: SystemCollector, opts: MonitorOptions): Promise<number> {
  const ctl = new Controller(collector, opts.intervalMs);
  const demo = demoStarter(ctl, opts.speed ?? 0.5);
  if (opts.demo) demo.start();
  ctl.start();
  await show(ctl, opts, { initialScreen: opts.demo ? 1 : 0, onDemo: demo.start, onExit: demo.stop });
  return 0;
}

export async function runReplay(recording: Recording, opts: MonitorOptions): Promise<number> {
  const ctl = new Controller(null, opts.intervalMs);
  const r = startReplay(recording, { speed: opts.speed ?? 1, onUpdate: () => ctl.notify() });
  ctl.replay = r.pm;
  ctl.status = [`replay of ${recording.path} at ${opts.speed ?? 1}×`, ...recording.notes].join("; ");
  await show(ctl, opts, { initialScreen: 1, onExit: r.stop });
  return 0;
}

/** `view FILE`: a snapshot's trace through the model at full speed, then its segments as they were
 * at the end; the Process, Tensors and Segments screens show the result. */
export async function runView(path: string, opts: MonitorOptions): Promise<number> {
  const { readSnapshot } = await import("../snapshot/view");
  const { snapshotSource } = await import("../profiler/snapshot-trace");
  const { createModel, resyncFromSnapshot } = await import("../profiler");
  const { replay } = await import("../profiler/replay");
  const snap = (await readSnapshot(path)) as { device_traces?: unknown[]; segments?: unknown[] };
  if (!snap || typeof snap !== "object" || !Array.isArray(snap.segments)) throw new Error(`${path} is not a PyTorch memory snapshot (no segments)`);
  const model = createModel().keepTrace();
  let end = 0;
  if (Array.isArray(snap.device_traces) && snap.device_traces.some((t) => Array.isArray(t) && t.length)) {
    const { source, ranges } = snapshotSource(snap as Parameters<typeof snapshotSource>[0]);
    for await (const _ of replay(source, { ranges, model })) {
      // to the end
    }
    end = Math.max(0, ...model.devices.map((d) => d.lastTime_us));
  }
  resyncFromSnapshot(model, snap.segments as Parameters<typeof resyncFromSnapshot>[1], end);
  const ctl = new Controller(null, opts.intervalMs);
  ctl.replay = { pid: 0, model, source: "replay", socket: null, title: `snapshot ${path}`, ended: true };
  ctl.status = `snapshot ${path}: 2 Process, 3 Tensors, 4 Segments`;
  await show(ctl, opts, { initialScreen: 3 });
  return 0;
}

/** `run -- CMD`: the program's output goes to a log (the monitor has the terminal). */
export async function runMonitorOnChild(opts: MonitorOptions & { rest: string[] }, start: (argv: string[], stdio: Parameters<typeof import("../collect/child").startChild>[1]) => Child): Promise<number> {
  const log = join(tmpdir(), `gpumem-tui-run-${process.pid}.log`);
  const fd = openSync(log, "w", 0o600);
  const child = start(opts.rest, { stdin: "ignore", stdout: fd, stderr: fd });
  const collector = new SystemCollector();
  const ctl = new Controller(collector, opts.intervalMs);
  ctl.status = `pid ${child.pid}: ${opts.rest.join(" ")} (output: ${log})`;
  let code: number | null = null;
  void child.exited.then((c) => {
    code = c;
    ctl.say(`pid ${child.pid} exited with status ${c}; its output is in ${log}; q quits`);
  });
  ctl.start();
  await show(ctl, opts);
  collector.close();
  if (code === null) process.stderr.write(`gpumem-tui: monitor closed; waiting for pid ${child.pid} (Ctrl-C stops it); output: ${log}\n`);
  const result = await child.exited;
  closeSync(fd);
  return result;
}
