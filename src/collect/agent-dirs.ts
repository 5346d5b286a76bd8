// Where the monitor looks for agents: the rules of agent/gpumem_agent/paths.py, from this side
// (docs/protocol.md, "The agent directory"). A directory is trusted only as lstat sees it: a real
// directory (a link is never followed), the monitor's own, closed to other users. A name another
// user took sends the agent to a private sibling `<name>.<random>`, which is found here by listing
// the parent.
import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join } from "node:path";

function ownUid(): number {
  return process.getuid?.() ?? 0;
}

/** Why `path` is not a directory only `uid` controls, or null; "missing" where nothing is there. */
export function privateReason(path: string, uid = ownUid()): string | null {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return "missing";
  }
  if (st.isSymbolicLink()) return "a symbolic link";
  if (!st.isDirectory()) return "not a directory";
  if (st.uid !== uid) return `owned by uid ${st.uid}, not by you (${uid})`;
  if ((st.mode & 0o077) !== 0) return `open to other users (mode ${(st.mode & 0o777).toString(8)})`;
  return null;
}

/** The directories an agent of this user may have asked for. The agent takes the first of
 *  `$GPUMEM_TUI_DIR`, `$XDG_RUNTIME_DIR/gpumem-tui`, `/dev/shm/gpumem-tui-<uid>`, `$TMPDIR/…`
 *  that applies to it; the monitor's environment can differ from the training's (a login shell
 *  has XDG_RUNTIME_DIR, a batch job may not), so it reads the runtime directory of either kind
 *  and /dev/shm. */
export function agentDirBases(env: NodeJS.ProcessEnv = process.env, uid = ownUid()): string[] {
  if (env.GPUMEM_TUI_DIR) return [env.GPUMEM_TUI_DIR];
  const out: string[] = [];
  for (const runtime of [env.XDG_RUNTIME_DIR, `/run/user/${uid}`]) {
    const dir = runtime && isAbsolute(runtime) ? join(runtime, "gpumem-tui") : null;
    if (dir && !out.includes(dir) && privateReason(runtime!, uid) === null) out.push(dir);
  }
  out.push(existsSync("/dev/shm") ? `/dev/shm/gpumem-tui-${uid}` : join(env.TMPDIR || "/tmp", `gpumem-tui-${uid}`));
  return out;
}

/** A private fallback's name: the base, a dot, and mkdtemp's letters, digits and underscores. */
function isFallback(name: string, base: string): boolean {
  return name.startsWith(`${base}.`) && /^[A-Za-z0-9_]+$/.test(name.slice(base.length + 1));
}

export interface DirScan {
  /** Directories to read: each checked just now. */
  dirs: string[];
  /** Names found taken or unsafe, in words: said, never read. */
  problems: string[];
}

/** A listing is trusted again only while its directory is unchanged and for at most this long. */
const LISTING_MAX_AGE_MS = 10_000;
/** A directory changed this recently may change again within its clock's granularity without its
 *  mtime moving: its listing is not kept. */
const LISTING_SETTLED_MS = 1_000;

/**
 * The names in a parent directory that are a base or its fallbacks, listed again only when the
 * directory changed (its mtime moved) or LISTING_MAX_AGE_MS passed. The parent is /dev/shm or the
 * runtime directory, which a training's DataLoader can fill with thousands of files, and the
 * monitor scans once a tick: a stat instead of a listing of them all.
 */
export class ParentListings {
  private readonly byBase = new Map<string, { mtimeMs: number; at: number; names: string[] }>();

  /** The names in `dirname(base)` that are `base` or its fallbacks, sorted; null: no such directory. */
  names(base: string, now = Date.now()): string[] | null {
    const parent = dirname(base);
    const name = basename(base);
    let mtimeMs: number;
    try {
      mtimeMs = statSync(parent).mtimeMs;
    } catch {
      this.byBase.delete(base);
      return null;
    }
    const kept = this.byBase.get(base);
    if (kept && kept.mtimeMs === mtimeMs && now - kept.at < LISTING_MAX_AGE_MS) return kept.names;
    let entries: string[];
    try {
      entries = readdirSync(parent);
    } catch {
      return null;
    }
    const names = entries.filter((e) => e === name || isFallback(e, name)).sort();
    if (now - mtimeMs >= LISTING_SETTLED_MS) this.byBase.set(base, { mtimeMs, at: now, names });
    else this.byBase.delete(base);
    return names;
  }
}

/** Each base and its private fallbacks, those that pass privateReason. `listings`: the parents'
 *  listings kept from the last scan (a watcher scanning once a tick); without, each is listed. */
export function scanAgentDirs(bases: string[], uid = ownUid(), listings = new ParentListings()): DirScan {
  const dirs: string[] = [];
  const problems: string[] = [];
  for (const base of bases) {
    const parent = dirname(base);
    const entries = listings.names(base);
    if (entries === null) continue; // no parent: no agent there
    for (const entry of entries) {
      const path = join(parent, entry);
      const why = privateReason(path, uid);
      if (why === null) dirs.push(path);
      else if (why !== "missing") problems.push(`agent directory ${path} is ${why}: ignored`);
    }
  }
  return { dirs, problems };
}
