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
  return privateCheck(path, uid).reason;
}

/** privateReason, with the directory's mtime as the same lstat saw it (null where it has none). */
function privateCheck(path: string, uid: number): { reason: string | null; mtimeMs: number | null } {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return { reason: "missing", mtimeMs: null };
  }
  const reason = st.isSymbolicLink()
    ? "a symbolic link"
    : !st.isDirectory()
      ? "not a directory"
      : st.uid !== uid
        ? `owned by uid ${st.uid}, not by you (${uid})`
        : (st.mode & 0o077) !== 0
          ? `open to other users (mode ${(st.mode & 0o777).toString(8)})`
          : null;
  return { reason, mtimeMs: reason === null ? st.mtimeMs : null };
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
  /** Each directory's mtime, as the check's lstat saw it (DirListings). */
  mtimes: number[];
  /** Names found taken or unsafe, in words: said, never read. */
  problems: string[];
}

/** A listing is trusted again only while its directory is unchanged and for at most this long. */
const LISTING_MAX_AGE_MS = 10_000;
/** A directory changed this recently may change again within its clock's granularity without its
 *  mtime moving: its listing is not kept. */
const LISTING_SETTLED_MS = 1_000;
/** Names shaped like a base's fallbacks kept from one listing: past this many (planted by another
 *  user to slow the monitor), the rest are counted, not checked, and the warning says "at least". */
export const MAX_SIBLINGS = 50_000;

/** A parent's names that are a base or its fallbacks, and how many fallback-shaped names were left
 *  unread past MAX_SIBLINGS. */
export interface Listing {
  names: string[];
  beyond: number;
}

/**
 * The names in a parent directory that are a base or its fallbacks, listed again only when the
 * directory changed (its mtime moved) or LISTING_MAX_AGE_MS passed. The parent is /dev/shm or the
 * runtime directory, which a training's DataLoader can fill with thousands of files, and the
 * monitor scans once a tick: a stat instead of a listing of them all.
 *
 * It also keeps which of those names belong to another user, so that a flood of them (20,000
 * `gpumem-tui-<uid>.x*` made by someone else) costs one lstat each while they stay listed, not one
 * each a tick: a name's owner cannot change but by root, and a name that goes and comes back is
 * checked again.
 */
export class ParentListings {
  private readonly byBase = new Map<string, { mtimeMs: number; at: number; listing: Listing }>();
  /** Paths found owned by another user: their reason, while their name stays listed. */
  private readonly foreign = new Map<string, string>();

  /** `maxSiblings`: MAX_SIBLINGS but in tests. */
  constructor(private readonly maxSiblings = MAX_SIBLINGS) {}

  get maxSiblingsRead(): number {
    return this.maxSiblings;
  }

  /** The names in `dirname(base)` that are `base` or its fallbacks, sorted; null: no such directory. */
  names(base: string, now = Date.now()): string[] | null {
    return this.listing(base, now)?.names ?? null;
  }

  /** As `names`, with the count of fallback-shaped names not read past MAX_SIBLINGS. */
  listing(base: string, now = Date.now()): Listing | null {
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
    if (kept && kept.mtimeMs === mtimeMs && now - kept.at < LISTING_MAX_AGE_MS) return kept.listing;
    let entries: string[];
    try {
      entries = readdirSync(parent);
    } catch {
      return null;
    }
    const listing = pick(entries, name, this.maxSiblings);
    this.forgetGone(parent, name, listing.names);
    if (now - mtimeMs >= LISTING_SETTLED_MS) this.byBase.set(base, { mtimeMs, at: now, listing });
    else this.byBase.delete(base);
    return listing;
  }

  /** Why `path` is not ours to read (privateReason), an owner found before not asked again. */
  reason(path: string, uid: number): string | null {
    const known = this.foreign.get(path);
    if (known !== undefined) return known;
    const why = privateReason(path, uid);
    if (why?.startsWith("owned by uid ")) this.foreign.set(path, why);
    return why;
  }

  private forgetGone(parent: string, name: string, names: string[]): void {
    const listed = new Set(names.map((n) => join(parent, n)));
    for (const path of this.foreign.keys()) {
      if (dirname(path) === parent && basename(path).startsWith(name) && !listed.has(path)) this.foreign.delete(path);
    }
  }
}

/** `name` and its fallback-shaped names among `entries`, sorted, at most `max` fallbacks. */
function pick(entries: string[], name: string, max: number): Listing {
  const names: string[] = [];
  let siblings = 0;
  let beyond = 0;
  for (const e of entries) {
    if (e === name) names.push(e);
    else if (isFallback(e, name)) {
      if (siblings < max) (siblings++, names.push(e));
      else beyond++;
    }
  }
  return { names: names.sort(), beyond };
}

/** Each base and its private fallbacks, those that pass privateReason. `listings`: the parents'
 *  listings kept from the last scan (a watcher scanning once a tick); without, each is listed.
 *  A base that is not ours is said by its path; its fallback-shaped names that are not ours are
 *  counted into one line (another user can make thousands of them: one line, not thousands). */
export function scanAgentDirs(bases: string[], uid = ownUid(), listings = new ParentListings()): DirScan {
  const dirs: string[] = [];
  const mtimes: number[] = [];
  const problems: string[] = [];
  for (const base of bases) {
    const listing = listings.listing(base);
    if (listing === null) continue; // no parent: no agent there
    const split = splitListing(listing, base, uid, listings);
    const siblings: [string, string][] = [];
    for (const path of split.rest) {
      const { reason: why, mtimeMs } = privateCheck(path, uid);
      if (why === null) dirs.push(path), mtimes.push(mtimeMs!);
      else if (why === "missing") continue;
      else if (path === base) problems.push(`agent directory ${path} is ${why}: ignored`);
      else siblings.push([path, why]);
    }
    const said = siblingsProblem(base, split, siblings, listing.beyond, listings.maxSiblingsRead);
    if (said) problems.push(said);
  }
  return { dirs, mtimes, problems };
}

/**
 * The names in the agents' directories, listed again only where a directory changed (its mtime, as
 * the scan's trust check saw it, moved: a manifest or ring made, renamed or removed), or
 * LISTING_MAX_AGE_MS passed, or it changed within LISTING_SETTLED_MS of its listing (a second
 * change inside the clock's granularity would leave its mtime as it was). The monitor scans them
 * once a tick; an idle machine's are the same every tick.
 */
export class DirListings {
  private readonly kept = new Map<string, { mtimeMs: number; at: number; names: string[] }>();
  /** How many listings were read (not kept): the tests count them. */
  reads = 0;

  /** The names in `dir`, whose mtime is `mtimeMs` now; throws as readdirSync where it cannot be read. */
  names(dir: string, mtimeMs: number, now = Date.now()): string[] {
    const kept = this.kept.get(dir);
    if (kept && kept.mtimeMs === mtimeMs && now - kept.at < LISTING_MAX_AGE_MS) return kept.names;
    this.kept.delete(dir);
    const names = readdirSync(dir);
    this.reads++;
    if (now - mtimeMs >= LISTING_SETTLED_MS) this.kept.set(dir, { mtimeMs, at: now, names });
    return names;
  }

  /** Only `dirs` kept (those the last scan found). */
  keepOnly(dirs: readonly string[]): void {
    for (const dir of this.kept.keys()) if (!dirs.includes(dir)) this.kept.delete(dir);
  }
}

/** A listing's fallback-shaped names of other users, counted by reason, and the rest (the base,
 *  and names that are ours or not yet known), split once a listing: while the listing is kept (the
 *  parent unchanged) the other users' names are not looked at again; the rest are checked each
 *  scan. */
interface Split {
  foreign: Map<string, number>;
  foreignCount: number;
  /** The one other user's name with its reason, where there is exactly one. */
  onlyForeign: [string, string] | null;
  rest: string[];
}
const splits = new WeakMap<Listing, Split>();

function splitListing(listing: Listing, base: string, uid: number, listings: ParentListings): Split {
  const kept = splits.get(listing);
  if (kept) return kept;
  const parent = dirname(base);
  const split: Split = { foreign: new Map(), foreignCount: 0, onlyForeign: null, rest: [] };
  for (const entry of listing.names) {
    const path = join(parent, entry);
    const why = path === base ? null : listings.reason(path, uid);
    if (why?.startsWith("owned by uid ")) {
      const key = reasonKey(why);
      split.foreign.set(key, (split.foreign.get(key) ?? 0) + 1);
      split.onlyForeign = split.foreignCount++ === 0 ? [path, why] : null;
    } else split.rest.push(path);
  }
  splits.set(listing, split);
  return split;
}

/** A reason without the "not by you (uid)" every such line shares: a key to count by. */
function reasonKey(why: string): string {
  return why.replace(/, not by you \(\d+\)$/, "");
}

/** One line for the fallback-shaped names of `base` that are not ours (`split.foreign`: another
 *  user's; `siblings`: the rest not private): the path and why where there is one, else their
 *  count and reasons (the owners); "at least" where some went unread. */
function siblingsProblem(base: string, split: Split, siblings: [string, string][], beyond: number, max: number): string | null {
  const n = split.foreignCount + siblings.length;
  if (n === 0 && beyond === 0) return null;
  if (n === 1 && beyond === 0) {
    const [path, why] = split.onlyForeign ?? siblings[0]!;
    return `agent directory ${path} is ${why}: ignored`;
  }
  const counts = new Map(split.foreign);
  for (const [, why] of siblings) counts.set(reasonKey(why), (counts.get(reasonKey(why)) ?? 0) + 1);
  const reasons = [...counts].sort((a, b) => b[1] - a[1]);
  const shown = reasons.slice(0, 4).map(([why, k]) => `${why}: ${k}`);
  if (reasons.length > 4) shown.push(`${reasons.length - 4} other reasons`);
  if (beyond > 0) shown.push(`${beyond} more such names past the first ${max} not read`);
  return `${beyond > 0 ? "at least " : ""}${n} directories named like ${basename(base)}.* in ${dirname(base)} are not private directories of yours (${shown.join("; ")}): ignored`;
}
