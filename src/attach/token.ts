// The one-time token of an attach (docs/protocol.md, "Attaching to a running process"). The
// bootstrap queued in the target cannot be taken back, so it runs only against this file: created
// here exclusively (O_EXCL|O_NOFOLLOW), 0600, in the private agents' directory (or its private
// sibling where the name is taken), holding a secret and a deadline; the bootstrap claims
// the attach by removing it, and the monitor gives up by removing it. Whoever removes it first wins.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, unlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { agentDirBases, privateReason, scanAgentDirs } from "../collect/agent-dirs";
import { writePrivate } from "../system/private-file";

export interface Token {
  path: string;
  secret: string;
  deadlineMs: number;
}

/**
 * The agents' directory this monitor writes the token into, made 0700 where missing. Where its name
 * is taken (another user's directory, a link, a file, a directory open to others) the token goes
 * where the agent goes (agent/gpumem_agent/paths.py open_agent_dir): a private sibling
 * `<name>.<random>`, one of ours already there (found as the monitor finds the agents': agent-dirs.ts
 * scanAgentDirs) or a new one from mkdtemp (0700, a name no one can take ahead). `note` says why.
 * An error in words where neither can be had.
 */
export function tokenDir(env: NodeJS.ProcessEnv = process.env): { dir: string; note?: string } | { error: string } {
  const base = agentDirBases(env)[0]!;
  let why: string | null;
  try {
    mkdirSync(base, { mode: 0o700 });
    why = privateReason(base);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    why = code === "EEXIST" ? privateReason(base) : `not to be made (${(e as Error).message})`;
  }
  if (why === null) return { dir: base };
  let dir = scanAgentDirs([base]).dirs.find((d) => d !== base) ?? null;
  if (dir === null) {
    try {
      dir = mkdtempSync(`${base}.`);
    } catch (e) {
      return { error: `the agents' directory ${base} is ${why}, and no private directory beside it could be made (${(e as Error).message}): set GPUMEM_TUI_DIR to a private directory` };
    }
    const made = privateReason(dir);
    if (made !== null) return { error: `the agents' directory ${base} is ${why}, and ${dir} made beside it is ${made}: set GPUMEM_TUI_DIR to a private directory` };
  }
  return { dir, note: `the agents' directory ${base} is ${why}; using ${dir} instead (the agent and the monitor find it too)` };
}

export function createToken(dir: string, pid: number, deadlineMs: number): Token {
  const secret = randomBytes(16).toString("hex");
  const path = join(dir, `attach-${pid}-${randomBytes(6).toString("hex")}.token`);
  // Exclusive, no link followed, closed to others: the bootstrap checks all three.
  writePrivate(path, `${secret} ${Math.floor(deadlineMs)}\n`);
  return { path, secret, deadlineMs };
}

/** CPython 3.14+: the bootstrap as a file the target opens (bootstrap.ts scriptText), beside the
 *  token and made the same way (exclusive, no link followed, 0600). The path it will have, then the
 *  file once its text (which names the path) is known. */
export function scriptPath(t: Token): string {
  return t.path.replace(/\.token$/, ".py");
}

export function createScript(path: string, text: string): void {
  writePrivate(path, text);
}

/** Remove a script the target never read (it exited, or the helper refused). */
export function removeScript(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // gone already: the target read it and removed it
  }
}

/** Give up: true when this removed the token (the bootstrap will do nothing), false when the
 *  bootstrap had claimed it already. */
export function withdrawToken(t: Token): boolean {
  try {
    unlinkSync(t.path);
    return true;
  } catch {
    return false;
  }
}

export function tokenClaimed(t: Token): boolean {
  try {
    readFileSync(t.path);
    return false;
  } catch {
    return true;
  }
}

/** What the agent's thread reported on failure (bootstrap.py `_start`), removed once read. */
export function takeAgentError(t: Token): string | null {
  try {
    const text = readFileSync(`${t.path}.error`, "utf8").trim().split("\n")[0] ?? "";
    unlinkSync(`${t.path}.error`);
    return text;
  } catch {
    return null;
  }
}

/** The manifest of `pid`'s agent, where one exists in this user's agents' directories. */
export function findManifest(pid: number, env: NodeJS.ProcessEnv = process.env): string | null {
  for (const dir of scanAgentDirs(agentDirBases(env)).dirs) {
    const path = join(dir, `${pid}.json`);
    // Only looked for here (a FIFO planted under the name must not block): readManifest reads it.
    if (existsSync(path)) return path;
  }
  return null;
}
