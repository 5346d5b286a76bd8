// Finding the agents: list the per-user directory, read manifests, open rings read-only.
// Processes that exited keep their last data (marked exited) and their stale files are removed.
import { existsSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { RingHeader } from "../ffi/events";
import { openRing, type RingReader } from "../ffi/ring";
import { readSmallText } from "../snapshot/input-file";
import { MAX_MANIFEST_BYTES, parseManifest, type Manifest } from "../system/manifest";
import { agentDirBases, DirListings, ParentListings, privateReason, scanAgentDirs } from "./agent-dirs";
import { inOtherPidNamespace, pidAlive } from "./procfs";

export interface Agent {
  pid: number;
  manifest: Manifest;
  /** The manifest file as it was read (manifestStamp): the agent rewrites it when ranges, lines
   *  or an OOM snapshot appear, and the monitor reads it again when the stamp changes. */
  manifestStamp: string;
  ring: RingReader | null;
  header: RingHeader | null;
  exited: boolean;
  /** The host's pid of an agent in another pid namespace (a container), whose own pid names
   *  another process here: null until the collector finds it (src/system/join.ts); undefined
   *  for an agent in the monitor's namespace. Liveness is checked on it. */
  hostPid?: number | null;
  /** Why this agent's data is missing or partial, in words; null when all is well. */
  problem: string | null;
  /** An agent in another pid namespace, its host pid never found, taken to have ended by what its
   *  ring says (endedElsewhere), in words; its files are left where they are. */
  endedElsewhere?: string;
}

/** How long an agent's header may go unstamped before it is taken to have ended, where its pid
 *  cannot be checked: its sync thread stamps `updated_ns` every 0.25 s (agent.py SYNC_SECONDS). */
export const AGENT_SILENT_US = 60e6;

/** Why an agent in another pid namespace, whose host pid the monitor never found (NVML does not
 *  list it here), has ended, from its ring alone; null where nothing says so. Its pid names no
 *  process here and its files stay where a monitor of its own namespace (a `run`, or
 *  GPUMEM_TUI_KEEP) keeps them after exit: closed (the agent's exit closes it) or silent for
 *  AGENT_SILENT_US (killed: no exit path ran) is what is left to tell by. */
export function endedElsewhere(header: RingHeader | null, nowUs: number): string | null {
  if (!header) return null;
  if (header.closed) return "its ring is closed (its agent's exit)";
  if (header.updated_unix_us > 0 && nowUs - header.updated_unix_us > AGENT_SILENT_US)
    return `its agent has not stamped its ring for ${Math.round((nowUs - header.updated_unix_us) / 1e6)} s (every 0.25 s while it runs)`;
  return null;
}

/** A manifest's text: a regular file of at most MAX_MANIFEST_BYTES, opened so that it cannot block
 *  (a FIFO in the agents' directory is refused, not waited on); an error in words otherwise. */
export function manifestText(path: string): string {
  return readSmallText(path, "manifest", MAX_MANIFEST_BYTES);
}

/** A manifest file that names a pid namespace other than the monitor's (read however it fails to parse). */
function otherNamespaceFile(path: string): boolean {
  try {
    const ns = (JSON.parse(manifestText(path)) as { pid_namespace?: unknown }).pid_namespace;
    return typeof ns === "number" && inOtherPidNamespace(ns);
  } catch {
    return false;
  }
}

/** What tells one write of a manifest from the next: modification time, size and inode (each
 *  write is a rename of a new file). The time alone repeats: file times tick with the kernel's
 *  coarse clock (a few ms), and the agent can rewrite twice within one tick. */
export function manifestStamp(path: string): string {
  const st = statSync(path);
  return `${st.mtimeMs}:${st.size}:${st.ino}`;
}

export class AgentWatcher {
  private readonly agents = new Map<number, Agent>();
  /** The directory each agent's manifest was found in (agent-dirs.ts: a base or its fallback). */
  private readonly dirs = new Map<number, string>();
  /** Problems with the directory or with single files, for the status line and JSON. */
  problems: string[] = [];

  /** The agents' directories asked for (agent-dirs.ts); each is read with its private fallbacks. */
  readonly bases: string[];

  /** The bases' parents as last listed (a scan a tick lists them only when they changed). */
  private readonly listings = new ParentListings();
  /** The agents' directories as last listed (listed again only when they changed). */
  readonly dirListings = new DirListings();

  /** `dir`: one directory to read (and its fallbacks) instead of the user's usual ones. */
  constructor(dir?: string) {
    this.bases = dir === undefined ? agentDirBases() : [dir];
  }

  /** Re-scan the directories and refresh every agent's header. Cheap: no event reading here. */
  refresh(): Agent[] {
    const scan = scanAgentDirs(this.bases, undefined, this.listings);
    this.problems = scan.problems;
    const files: [string, string][] = [];
    this.dirListings.keepOnly(scan.dirs);
    for (const [k, dir] of scan.dirs.entries()) {
      try {
        for (const file of this.dirListings.names(dir, scan.mtimes[k]!)) files.push([dir, file]);
      } catch {
        // gone since the scan
      }
    }
    for (const [dir, file] of files) {
      const m = /^(\d+)\.json$/.exec(file);
      if (!m) continue;
      const pid = Number(m[1]);
      if (this.agents.has(pid)) continue;
      const path = join(dir, file);
      try {
        const stamp = manifestStamp(path);
        const manifest = parseManifest(manifestText(path), path);
        if (manifest.pid !== pid) throw new Error(`manifest ${path} names pid ${manifest.pid}, its file name says ${pid}`);
        const hostPid = inOtherPidNamespace(manifest.pid_namespace) ? null : undefined;
        this.dirs.set(pid, dir);
        this.agents.set(pid, { pid, manifest, manifestStamp: stamp, ring: null, header: null, exited: false, problem: null, hostPid });
      } catch (e) {
        // A file of a process in another pid namespace is not stale because this pid is dead here.
        if (!pidAlive(pid) && !otherNamespaceFile(path)) this.removeStale(dir, pid);
        else this.problems.push((e as Error).message);
      }
    }
    for (const agent of this.agents.values()) {
      this.refreshOne(agent);
      if (agent.endedElsewhere)
        this.problems.push(`agent of pid ${agent.pid} (pid namespace ${agent.manifest.pid_namespace}): shown as exited: ${agent.endedElsewhere}, and no process NVML lists here is it`);
    }
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
    // (the agent removes its files at exit) and its ring does not say it ended (files kept at exit
    // for a monitor of that namespace, or left by a killed process: endedElsewhere).
    const elsewhere = agent.hostPid === null ? endedElsewhere(agent.header, Date.now() * 1000) : null;
    const alive = agent.hostPid === null ? elsewhere === null && existsSync(this.manifestPath(agent)) : pidAlive(agent.hostPid ?? agent.pid);
    if (!alive) {
      // One last look before the mapping goes: the agent writes its final totals at exit (an OOM
      // just before the end, the last step's numbers), and records may have come since the last
      // read. The header is taken now; the ring stays open until the next refresh so that its
      // last events are read. The files can already be gone: the mapping outlives them. A program
      // started by `run` leaves its files to us (docs/protocol.md, "The end of a run"): its final
      // manifest names every range and the tensors at exit, and the ring of an agent first met
      // now (a run shorter than a tick) is opened here, before the files go.
      this.rereadManifest(agent, { final: true });
      if (!agent.ring) {
        try {
          agent.ring = openRing(agent.manifest.ring, { fold: true });
          if (agent.ring.header().pid !== agent.pid) (agent.ring.close(), (agent.ring = null));
        } catch {
          agent.ring = null; // no ring left (removed at exit, or never made): the manifest's facts stand
        }
      }
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
      const dir = this.dirs.get(agent.pid);
      // Files its ring says are of an ended process but whose pid cannot be checked from here are
      // left to a monitor of its own namespace (a `run` reads them at its end).
      if (elsewhere !== null) agent.endedElsewhere = elsewhere;
      else if (dir) this.removeStale(dir, agent.pid);
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
      // Detached (`gpumem-tui detach`, or its monitor gone) while the program runs on: its ring is
      // closed and its files gone; the process is again one without an agent.
      if (header.closed && agent.manifest.attached && !existsSync(this.manifestPath(agent))) {
        agent.ring.close();
        this.agents.delete(agent.pid);
        return;
      }
      // Its header read for the first time (a `--json --once` has only this refresh): one that
      // says the process ended takes the exit path now.
      if (agent.hostPid === null && endedElsewhere(header, Date.now() * 1000) !== null) this.refreshOne(agent);
    } catch (e) {
      agent.problem = (e as Error).message;
    }
  }

  /** The manifest again where the agent rewrote it (a stat per tick; parsed only when it changed).
   *  A rewrite that fails to parse keeps the last good manifest and says why. Also called after a
   *  ring read that met a range the manifest did not name yet. `final`: the process has exited,
   *  and this is the last read: parsed whatever the stamp. */
  rereadManifest(agent: Agent, opts: { final?: boolean } = {}): void {
    const path = this.manifestPath(agent);
    let stamp: string;
    try {
      stamp = manifestStamp(path);
    } catch {
      return; // removed at exit: the last manifest stands
    }
    if (stamp === agent.manifestStamp && !opts.final) return;
    try {
      const manifest = parseManifest(manifestText(path), path);
      if (manifest.pid !== agent.pid) throw new Error(`manifest ${path} now names pid ${manifest.pid}: the last one is kept`);
      // Attached again after a detach (`gpumem-tui attach`): a new ring under the same name.
      if ((manifest.attached?.unix_ns ?? null) !== (agent.manifest.attached?.unix_ns ?? null)) {
        agent.ring?.close();
        agent.ring = null;
        agent.header = null;
      }
      agent.manifest = manifest;
      agent.manifestStamp = stamp;
    } catch (e) {
      this.problems.push((e as Error).message);
    }
  }

  private manifestPath(agent: Agent): string {
    return join(this.dirs.get(agent.pid) ?? this.bases[0]!, `${agent.pid}.json`);
  }

  /** An exited agent's files, removed only through a directory checked just before (lstat: ours,
   *  private, no link): a name swapped for a link since the scan deletes nothing behind it. */
  private removeStale(dir: string, pid: number): void {
    if (privateReason(dir) !== null) return;
    for (const suffix of [".json", ".ring", ".sock", ".seed.json"]) {
      const path = join(dir, `${pid}${suffix}`);
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
    this.dirs.clear();
  }
}
