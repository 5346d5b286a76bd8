// What the monitor does to an agent's process, for any front end: a snapshot (d), empty_cache (e),
// reset_peaks (r), a signal (k); an attach (a) is src/attach's attachProcess, a layer above. Each
// returns a plain result, its outcome in words; `say` tells what it is doing meanwhile (a command
// can take seconds). Nothing here draws.
import { join, resolve } from "node:path";
import { existsSync } from "node:fs";
import { ask } from "./control";
import type { ProcessModel } from "./live";
import { signalProcess, stillRunning, type StopSignal } from "./signal";
import { freeDumpPath, MEMORY_VIZ, writeModelSnapshot, writtenSentence } from "../snapshot/write";
import { formatBytes } from "../words";

export interface ActionResult {
  ok: boolean;
  /** The outcome in words; a line break starts a line of its own (a path shown whole). */
  message: string;
}

export type Say = (line: string) => void;

export type AgentCommand = "dump_snapshot" | "empty_cache" | "reset_peaks";

/** Why `pm` cannot be asked anything (no socket, a replay, exited), or null where it can. */
export function notAskable(pm: ProcessModel, cmd: string): string | null {
  if (!pm.socket) return `${cmd}: pid ${pm.pid} ${pm.source === "replay" ? "is a replay" : "has no control socket"}: there is no process to ask`;
  if (pm.ended) return `${cmd}: pid ${pm.pid} has exited`;
  return null;
}

/** empty_cache or reset_peaks, asked of the process's agent. */
export async function agentCommand(pm: ProcessModel, cmd: "empty_cache" | "reset_peaks", say: Say): Promise<ActionResult> {
  const no = notAskable(pm, cmd);
  if (no) return { ok: false, message: no };
  say(`${cmd}: asking pid ${pm.pid}…`);
  if (cmd === "reset_peaks") {
    const r = await ask(pm.socket!, cmd, {});
    if (!r.ok) return { ok: false, message: `${cmd} failed: ${r.error}` };
    pm.model.resetPeaks(); // the one peak shown is torch's: reset there, reset here
    return { ok: true, message: `peaks reset for pid ${pm.pid}` };
  }
  const r = await ask(pm.socket!, cmd, {});
  if (!r.ok) return { ok: false, message: `${cmd} failed: ${r.error}` };
  const before = r.reply.reserved_before.reduce((a, b) => a + b, 0);
  const after = r.reply.reserved_after.reduce((a, b) => a + b, 0);
  return { ok: true, message: `empty_cache released ${formatBytes(before - after)} (reserved ${formatBytes(before)} → ${formatBytes(after)})` };
}

/**
 * One snapshot into `dir`. The agent's own (torch's, with its trace and stacks) where a live agent
 * records memory history; otherwise the monitor's, from its own events (a replay, an exited
 * process, an agent that failed, or one without history: torch's file would have segments and no
 * trace, so the agent is asked `only_with_trace` and writes nothing).
 */
export async function dumpSnapshot(pm: ProcessModel, snapshotDir: string, say: Say): Promise<ActionResult> {
  const dir = resolve(snapshotDir);
  // Writing takes a moment for a long trace (100,000 entries: ~0.1-0.3 s): say so first.
  const own = async (why: string): Promise<ActionResult> => {
    say(`writing a snapshot from the monitor's events${why ? ` (${why})` : ""}…`);
    await new Promise((r) => setTimeout(r, 0));
    try {
      const f = writeModelSnapshot(pm.model, dir, pm.pid);
      return { ok: true, message: `${writtenSentence(f, `snapshot of pid ${pm.pid}`, why)}\n${MEMORY_VIZ}` };
    } catch (e) {
      return { ok: false, message: `writing a snapshot into ${dir} failed: ${(e as Error).message}${why ? ` (${why})` : ""}` };
    }
  };
  if (!pm.socket || pm.ended) return own(pm.ended && pm.socket ? `pid ${pm.pid} has exited` : "");
  say(`dump_snapshot: asking pid ${pm.pid}…`);
  const path = freeDumpPath(dir, pm.pid);
  const a = await ask(pm.socket, "dump_snapshot", { path, only_with_trace: true });
  if (!a.ok) return own(`the agent's dump failed: ${a.error}`);
  const r = a.reply;
  if (r.path === null || r.size === null) return own("the agent records no memory history");
  // An agent in another container writes into its own filesystem: the path may not exist here.
  const where = existsSync(r.path) ? "" : " (written in the process's own filesystem: another container?)";
  return { ok: true, message: `snapshot of pid ${pm.pid} by its agent: ${formatBytes(r.size)}${where}\n${r.path}\n${MEMORY_VIZ}` };
}

/** `k`: SIGTERM or SIGKILL to `pid`; `later` gets, a second after a signal sent, whether it has gone. */
export function stopProcess(pid: number, signal: StopSignal, commandLine: string | null, later: (r: ActionResult) => void): ActionResult {
  const r = signalProcess(pid, signal, { command: commandLine });
  if (r.ok) {
    setTimeout(() => {
      const running = stillRunning(pid);
      later({ ok: !running, message: running ? `pid ${pid} still runs 1 s after ${signal}${signal === "SIGTERM" ? " (k, then 9 for SIGKILL)" : ""}` : `pid ${pid} has stopped (${signal})` });
    }, 1000).unref?.();
  }
  return r;
}
