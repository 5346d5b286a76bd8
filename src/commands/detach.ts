// `gpumem-tui detach PID`: asks the process's agent (over its control socket) to stop, remove its
// hooks and files (docs/protocol.md, "Attaching to a running process").
import { existsSync } from "node:fs";
import { findManifest } from "../attach/token";
import { manifestText } from "../collect/agents";
import { ask } from "../collect/control";
import type { Options } from "./options";

export async function detachProcess(pid: number, env: NodeJS.ProcessEnv = process.env): Promise<{ ok: boolean; line: string }> {
  const manifest = findManifest(pid, env);
  if (!manifest) return { ok: false, line: `detach ${pid}: no agent of yours runs in process ${pid} (nothing to detach)` };
  let socket: unknown;
  try {
    socket = (JSON.parse(manifestText(manifest)) as Record<string, unknown>).socket;
  } catch (e) {
    return { ok: false, line: `detach ${pid}: its manifest ${manifest} cannot be read: ${(e as Error).message}` };
  }
  if (typeof socket !== "string") return { ok: false, line: `detach ${pid}: its manifest ${manifest} names no control socket` };
  const reply = await ask(socket, "detach", {}, 10_000);
  // The agent removes its files after its answer: detached is when its manifest is gone.
  for (let i = 0; reply.ok && i < 250 && existsSync(manifest); i++) await Bun.sleep(20);
  if (reply.ok && existsSync(manifest)) return { ok: false, line: `detach ${pid}: the agent answered but its manifest ${manifest} is still there after 5 s` };
  return reply.ok ? { ok: true, line: `detached from process ${pid}${reply.reply.note ? `: ${reply.reply.note}` : ""}` } : { ok: false, line: `detach ${pid}: ${reply.error}` };
}

export async function command(opts: Options): Promise<number> {
  const r = await detachProcess(Number(opts.rest[0]));
  process.stderr.write(`gpumem-tui: ${r.line}\n`);
  return r.ok ? 0 : 1;
}
