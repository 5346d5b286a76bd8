// Files the monitor writes that hold a program's output or its command line: never a file that
// someone else could have put there first, never through a link, readable by their owner only
// (0600), and removed again on error, on exit and on SIGINT, SIGTERM or SIGHUP where they are
// temporary. The one place where such a file is opened.
import { randomBytes } from "node:crypto";
import { closeSync, constants, fchmodSync, fstatSync, ftruncateSync, lstatSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync, type Stats } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;

/** Why a path was refused or could not be written, in words (errno codes are not for users). */
export function why(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  switch (err.code) {
    case "ENOENT":
      return "its directory does not exist";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "EISDIR":
      return "it is a directory";
    case "EEXIST":
      return "a file of that name is already there";
    case "ELOOP":
      return "it is a symbolic link (never followed)";
    case "ENOSPC":
      return "no space left on the device";
    case "EDQUOT":
      return "over the disk quota";
    default:
      return err.message;
  }
}

/** What a name holds that is not a regular file, in the agent's words (paths.py _kind). */
function kindOf(st: Stats): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isDirectory()) return "a directory";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  return "not a file";
}

/**
 * Why a file must not be put at the name `path` in place of what is there, or null (nothing there,
 * or a regular file): a link (lstat: never followed) or anything not a regular file is said, never
 * replaced; with `owner`, so is another user's file. The rule of the agent's check_replaceable
 * (agent/gpumem_agent/paths.py), in the same words, for every name the monitor writes over.
 */
export function nameRefusal(path: string, opts: { owner?: boolean } = {}): string | null {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st) return null;
  if (st.isSymbolicLink()) return why({ code: "ELOOP" });
  if (!st.isFile()) return `not a regular file (${kindOf(st)})`;
  if (opts.owner && st.uid !== process.geteuid!()) return `it belongs to another user (uid ${st.uid})`;
  return null;
}

/** A one-line error naming the path (the callers add what it was for). */
export class PrivateFileError extends Error {
  override name = "PrivateFileError";
  constructor(
    readonly path: string,
    readonly reason: string,
    readonly code?: string,
  ) {
    super(`${path}: ${reason}`);
  }
}

/**
 * Creates `path` for writing and returns its descriptor: O_EXCL, so a file planted there first
 * (by another user, to read what we write) is never reused; O_NOFOLLOW, so a planted link never
 * leads the write to a file of the planter's choosing; mode 0600 (a umask can only narrow it).
 */
export function createPrivate(path: string): number {
  try {
    return openSync(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  } catch (e) {
    throw new PrivateFileError(path, why(e), (e as NodeJS.ErrnoException).code);
  }
}

/**
 * A new private file in $TMPDIR named `${prefix}${random}${suffix}`: a name no one can guess ahead
 * (so no one can hold it to make our open fail), created as `createPrivate` does.
 */
export function createPrivateTemp(prefix: string, suffix: string): { path: string; fd: number } {
  const path = join(tmpdir(), `${prefix}${randomBytes(6).toString("hex")}${suffix}`);
  return { path, fd: createPrivate(path) };
}

/** A new private directory in $TMPDIR (mkdtemp: 0700, an unguessable name that mkdir never reuses),
 *  removed as `removeOnExit` says. */
export function temporaryDir(prefix: string): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: removeOnExit(path) };
}

/** Writes `data` whole to `fd` (writeSync may write less than asked). */
export function writeAll(fd: number, data: Uint8Array | string): void {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
}

/** Writes `data` to a new private file at `path`; on any error nothing is left there. */
export function writePrivate(path: string, data: Uint8Array | string): void {
  const fd = createPrivate(path);
  try {
    writeAll(fd, data);
  } catch (e) {
    closeSync(fd);
    unlinkSync(path); // ours: created exclusively above
    throw new PrivateFileError(path, why(e));
  }
  closeSync(fd);
}

/**
 * A path the user named for output (`run --json --output F`): created as `createPrivate` does, or,
 * where a file is already there, replaced only when it is a regular file of the user's own with
 * no other name. It is truncated and set to 0600 in place rather than removed and created anew:
 * the file that is checked (fstat of the open descriptor) is then the file that is written, with
 * no moment when the name is free for someone else to take, and no name is removed that was not
 * checked. Refused (one line, before the program starts): a symbolic link (O_NOFOLLOW), another
 * user's file (its owner could read what we write), a file with other names (a hard link planted
 * in a shared directory would lead the write to a file elsewhere), and anything not a regular
 * file (O_NONBLOCK: a FIFO cannot hold the open).
 */
export function openOutput(path: string): { fd: number; created: boolean } {
  try {
    return { fd: createPrivate(path), created: true };
  } catch (e) {
    if (!(e instanceof PrivateFileError && e.code === "EEXIST")) throw e;
  }
  const refuse = (reason: string, fd?: number): never => {
    if (fd !== undefined) closeSync(fd);
    throw new PrivateFileError(path, reason);
  };
  const there = nameRefusal(path);
  if (there) refuse(there);
  let fd: number;
  try {
    fd = openSync(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    return refuse((e as NodeJS.ErrnoException).code === "ENXIO" ? "not a regular file" : why(e));
  }
  const st = fstatSync(fd);
  if (!st.isFile()) refuse(`not a regular file (${kindOf(st)})`, fd);
  if (st.uid !== process.geteuid!()) refuse(`it belongs to another user (uid ${st.uid}), who could read what is written`, fd);
  if (st.nlink !== 1) refuse(`it has ${st.nlink - 1} other name(s) (hard links): a write would change the file under them too`, fd);
  ftruncateSync(fd, 0);
  fchmodSync(fd, 0o600);
  return { fd, created: false };
}

/** Removes `path` where it is still the file open as `fd` (not a name someone put there since). */
export function removeOpened(path: string, fd: number): void {
  try {
    const open = fstatSync(fd);
    const now = lstatSync(path);
    if (open.dev === now.dev && open.ino === now.ino) unlinkSync(path);
  } catch {
    // gone already
  }
}

// Temporary files and directories removed when the process ends, however it ends but SIGKILL.
const temporary = new Set<string>();
const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
let installed = false;

function removeAll(): void {
  for (const path of temporary) {
    try {
      rmSync(path, { recursive: true, force: true });
    } catch {
      // on the way out: what cannot be removed stays, and the rest still goes
    }
  }
  temporary.clear();
}

function onSignal(sig: NodeJS.Signals): void {
  // Where another part of the monitor also listens (the screens' quit, `run` passing signals on,
  // a stream's end), it ends the process its own way and the exit hook removes the files then.
  if (process.listenerCount(sig) > 1) return;
  removeAll();
  // Otherwise the signal does what it does without us: the process ends by it (128 + N to a shell).
  for (const s of SIGNALS) process.off(s, onSignal);
  process.kill(process.pid, sig);
}

/**
 * Removes `path` (a file, or a directory with what is in it) when the process exits or is ended by
 * SIGINT, SIGTERM or SIGHUP. Returns a function that removes it at once and forgets it.
 */
export function removeOnExit(path: string): () => void {
  if (!installed) {
    installed = true;
    process.on("exit", removeAll);
    for (const s of SIGNALS) process.on(s, onSignal);
  }
  temporary.add(path);
  return () => {
    temporary.delete(path);
    rmSync(path, { recursive: true, force: true });
  };
}
