// The one-time token of an attach (docs/protocol.md, "Attaching to a running process"). The
// bootstrap queued in the target cannot be taken back, so it runs only against this file: created
// here 0600 in the private agents' directory, holding a secret and a deadline; the bootstrap claims
// the attach by removing it, and the monitor gives up by removing it. Whoever removes it first wins.
import { existsSync, mkdirSync, readFileSync, unlinkSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { agentDirBases, privateReason, scanAgentDirs } from "../collect/agent-dirs";
import { writePrivate } from "../system/private-file";

export interface Token {
  path: string;
  secret: string;
  deadlineMs: number;
}

/** The agents' directory this monitor writes into, made 0700 where missing; an error in words. */
export function tokenDir(env: NodeJS.ProcessEnv = process.env): { dir: string } | { error: string } {
  const dir = agentDirBases(env)[0]!;
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return { error: `cannot create the agents' directory ${dir}: ${(e as Error).message}` };
  }
  const why = privateReason(dir);
  return why === null ? { dir } : { error: `the agents' directory ${dir} is ${why}: remove it, or set GPUMEM_TUI_DIR to a private directory` };
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
