// Finding the agents: list the per-user directory, read manifests, open rings read-only.
// Processes that exited keep their last data (marked exited) and their stale files are removed.
import { existsSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { RingHeader } from "../ffi/events";
import { openRing, type RingReader } from "../ffi/ring";
import type { Manifest } from "../system/manifest";
import { inOtherPidNamespace, pidAlive } from "./procfs";

export function agentDir(env = process.env): string {
  if (env.GPUMEM_TUI_DIR) return env.GPUMEM_TUI_DIR;
  const uid = process.getuid?.() ?? 0;
  if (existsSync("/dev/shm")) return `/dev/shm/gpumem-tui-${uid}`;
  return join(env.TMPDIR || "/tmp", `gpumem-tui-${uid}`);
}

export interface Agent {
  pid: number;
  manifest: Manifest;
  /** The manifest file's modification time when it was read: the agent rewrites it when ranges,
   *  lines or an OOM snapshot appear, and the monitor reads it again. */
  manifestMtimeMs: number;
  ring: RingReader | null;
  header: RingHeader | null;
  exited: boolean;
  /** The host's pid of an agent in another pid namespace (a container), whose own pid names
   *  another process here: null until the collector finds it (src/system/join.ts); undefined
   *  for an agent in the monitor's namespace. Liveness is checked on it. */
  hostPid?: number | null;
  /** Why this agent's data is missing or partial, in words; null when all is well. */
  problem: string | null;
}

/** Refuse a directory that another user could have planted or can write into. */
export function checkAgentDir(dir: string): string | null {
  const st = statSync(dir);
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return `agent directory ${dir} belongs to uid ${st.uid}, not to you (${uid}): ignored`;
  if ((st.mode & 0o077) !== 0) return `agent directory ${dir} is open to other users (mode ${(st.mode & 0o777).toString(8)}): ignored`;
  return null;
}

/** A manifest file that names a pid namespace other than the monitor's (read however it fails to parse). */
function otherNamespaceFile(path: string): boolean {
  try {
    const ns = (JSON.parse(readFileSync(path, "utf8")) as { pid_namespace?: unknown }).pid_namespace;
    return typeof ns === "number" && inOtherPidNamespace(ns);
  } catch {
    return false;
  }
}

export class AgentWatcher {
  private readonly agents = new Map<number, Agent>();
  /** Problems with the directory or with single files, for the status line and JSON. */
  problems: string[] = [];

  constructor(readonly dir = agentDir()) {}

  /** Re-scan the directory and refresh every agent's header. Cheap: no event reading here. */
  refresh(): Agent[] {
    this.problems = [];
    let names: string[] = [];
    if (existsSync(this.dir)) {
      const bad = checkAgentDir(this.dir);
      if (bad) this.problems.push(bad);
      else names = readdirSync(this.dir);
    }
    for (const file of names) {
      const m = /^(\d+)\.json$/.exec(file);
      if (!m) continue;
      const pid = Number(m[1]);
      if (this.agents.has(pid)) continue;
      const path = join(this.dir, file);
      try {
        // Loaded on the first manifest only: zod costs 25 ms of start-up that a machine without
        // agents should not pay.
        const { parseManifest } = require("../system/manifest") as typeof import("../system/manifest");
        const manifestMtimeMs = statSync(path).mtimeMs;
        const manifest = parseManifest(readFileSync(path, "utf8"), path);
        if (manifest.pid !== pid) throw new Error(`manifest ${path} names pid ${manifest.pid}, its file name says ${pid}`);
        const hostPid = inOtherPidNamespace(manifest.pid_namespace) ? null : undefined;
        this.agents.set(pid, { pid, manifest, manifestMtimeMs, ring: null, header: null, exited: false, problem: null, hostPid });
      } catch (e) {
        // A file of a process in another pid namespace is not stale because this pid is dead here.
        if (!pidAlive(pid) && !otherNamespaceFile(path)) this.removeStale(pid);
        else this.problems.push((e as Error).message);
      }
    }
    for (const agent of this.agents.values()) this.refreshOne(agent);
    return [...this.agents.values()];
  }

  get(pid: number): Agent | undefined {
    return this.agents.get(pid);
  }

  private refreshOne(agent: Agent): void {
    if (agent.exited) {
      // The reading after exit is done (LiveModels read the last events): let the mapping go.
      agent.ring?.close();
      agent.ring = null;
      return;
    }
    // In another pid namespace with its host pid not yet found: alive while its manifest is there
    // (the agent removes its files at exit).
    const alive = agent.hostPid === null ? existsSync(join(this.dir, `${agent.pid}.json`)) : pidAlive(agent.hostPid ?? agent.pid);
    if (!alive) {
      // One last look before the mapping goes: the agent writes its final totals at exit (an OOM
      // just before the end, the last step's numbers), and records may have come since the last
      // read. The header is taken now; the ring stays open until the next refresh so that its
      // last events are read. The files can already be gone: the mapping outlives them.
      if (agent.ring) {
        try {
          const header = agent.ring.header();
          if (header.pid === agent.pid) agent.header = header;
        } catch {
          // a ring that cannot be read now keeps the header of the last refresh
        }
      }
      agent.exited = true;
      agent.problem = "exited";
      this.removeStale(agent.pid);
      return;
    }
    this.rereadManifest(agent);
    try {
      agent.ring ??= openRing(agent.manifest.ring, { fold: true }); // into a model: frees folded
      const header = agent.ring.header();
      if (header.pid !== agent.pid) {
        // A manifest that points at another process's ring would show that process's numbers
        // under this pid: refuse it.
        agent.problem = `ring ${agent.manifest.ring} was written by pid ${header.pid}, but the manifest is pid ${agent.pid}'s: ignored`;
        agent.header = null;
        return;
      }
      agent.header = header;
      agent.problem = null;
    } catch (e) {
      agent.problem = (e as Error).message;
    }
  }

  /** The manifest again where the agent rewrote it (a stat per tick; parsed only when it changed).
   *  A rewrite that fails to parse keeps the last good manifest and says why. Also called after a
   *  ring read that met a range the manifest did not name yet. */
  rereadManifest(agent: Agent): void {
    const path = join(this.dir, `${agent.pid}.json`);
    let mtime: number;
    try {
      mtime = statSync(path).mtimeMs;
    } catch {
      return; // removed at exit: the last manifest stands
    }
    if (mtime === agent.manifestMtimeMs) return;
    try {
      const { parseManifest } = require("../system/manifest") as typeof import("../system/manifest");
      const manifest = parseManifest(readFileSync(path, "utf8"), path);
      if (manifest.pid !== agent.pid) throw new Error(`manifest ${path} now names pid ${manifest.pid}: the last one is kept`);
      agent.manifest = manifest;
      agent.manifestMtimeMs = mtime;
    } catch (e) {
      this.problems.push((e as Error).message);
    }
  }

  /** An exited agent's files: removed only if they are ours (the directory check passed). */
  private removeStale(pid: number): void {
    for (const suffix of [".json", ".ring", ".sock"]) {
      const path = join(this.dir, `${pid}${suffix}`);
      try {
        unlinkSync(path);
      } catch {
        // already gone
      }
    }
  }

  close(): void {
    for (const a of this.agents.values()) a.ring?.close();
    this.agents.clear();
  }
}
