// Builds the test-only C programs (the ring producer) once per test run.
import { test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { NATIVE_DIR, ROOT } from "../../src/ffi/build";
import { KEEP } from "./keep";

let dir = "";
const built = new Map<string, string>();

/** This module's folder in the run's (test/support/tmp.ts), kept from file to file by a worker
 *  that keeps its modules (`bun run test`, --no-isolate): tmp.ts leaves names starting with KEEP
 *  when it empties the folder after each file, so what is built here is built once a worker.
 *  Made again, and what it held built again, where it is gone. */
function ownDir(): string {
  if (!dir || !existsSync(dir)) {
    dir = mkdtempSync(join(tmpdir(), `${KEEP}native-`));
    built.clear();
  }
  return dir;
}

export function tmpPath(name: string): string {
  return join(ownDir(), name);
}

/** Compile test/support/<name>.c against cuda/ and return the binary's path. */
export function buildTool(name: string): string {
  const out = join(ownDir(), name);
  const cached = built.get(name);
  if (cached) return cached;
  const src = join(ROOT, "test", "support", `${name}.c`);
  const proc = Bun.spawnSync(["cc", "-std=c11", "-O2", "-Wall", "-I", NATIVE_DIR, src, "-o", out, "-lpthread"], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`building ${name}.c failed:\n${proc.stderr}`);
  built.set(name, out);
  return out;
}

/** Run the producer: writes `events` records per thread into a ring of `capacity` at `path`. */
export function produce(path: string, capacity: number, events: number, ...extra: (string | number)[]): number {
  const proc = Bun.spawnSync([buildTool("producer"), path, String(capacity), String(events), ...extra.map(String)], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`producer failed: ${proc.stderr}`);
  return Number(proc.stdout.toString().trim());
}

/** Compile test/support/<name>.c as a shared library (in this run's private folder, 0700: the agent
 *  loads a hook only from a folder and file no other user can write) and return its path. */
export function buildLibrary(name: string, python = "python3", defines: string[] = []): string {
  const key = `${name}${python === "python3" ? "" : `-${basename(python)}`}${defines.map((d) => `-${d}`).join("")}.so`;
  const out = join(ownDir(), key);
  const cached = built.get(key);
  if (cached) return cached;
  const src = join(ROOT, "test", "support", `${name}.c`);
  // The hook double captures Python stacks with the hook's own walker (cuda/pystack.c), against the
  // headers of the python its tests run (python3, unless told).
  const inc = name === "hook_double" ? pythonHeaders(python) : null;
  const py = name === "hook_double" ? [...(inc ? ["-I", inc] : ["-DGPUMEM_NO_PYTHON_H"]), join(NATIVE_DIR, "pystack.c")] : [];
  const proc = Bun.spawnSync(["cc", "-std=c11", "-O2", "-Wall", "-shared", "-fPIC", ...defines.map((d) => `-D${d}`), "-I", NATIVE_DIR, ...py, src, "-o", out, ...(py.length ? ["-ldl"] : [])], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`building ${name}.c failed:\n${proc.stderr}`);
  chmodSync(out, 0o700);
  built.set(key, out);
  return out;
}

/** The include folder of the python3 on PATH where it holds Python.h (the headers the hook's stack
 *  walker is built against), else null: the double then captures no stacks, and their tests skip. */
export function pythonHeaders(python = "python3"): string | null {
  // Asked by every file of the stack tests, for each interpreter: one answer a worker.
  const known = headers.get(python);
  if (known !== undefined) return known;
  const p = Bun.spawnSync([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"], { stdout: "pipe", stderr: "pipe" });
  const dir = p.exitCode === 0 ? p.stdout.toString().trim() : "";
  const found = dir && existsSync(join(dir, "Python.h")) ? dir : null;
  headers.set(python, found);
  return found;
}
const headers = new Map<string, string | null>();

/** Why the stack tests cannot run here, or null where they can (Python.h for the walker). */
export const STACKS_SKIP = pythonHeaders() ? null : "(needs python3's headers, Python.h, for cuda/pystack.c: install python3-dev)";

/** A test of the Python stacks (the walker built into the hook double): where it cannot be built
 *  against this python3's headers it skips, saying why. */
export function stacksTest(name: string, fn: () => void | Promise<unknown>, timeout?: number) {
  if (STACKS_SKIP) test.skip(`${name} ${STACKS_SKIP}`, fn);
  else test(name, fn, timeout);
}

/** A CPython 3.`minor` that runs here: `python3.<minor>` on PATH, else one pyenv installed (its
 *  shims run only the versions selected); null where there is none. */
export function cpython(minor: number): string | null {
  // Looked for by several files, up to three interpreters started each time: once a worker.
  if (!pythons.has(minor)) pythons.set(minor, findCpython(minor));
  return pythons.get(minor)!;
}
const pythons = new Map<number, string | null>();

function findCpython(minor: number): string | null {
  const runs = (p: string) => Bun.spawnSync([p, "-c", "pass"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
  const name = `python3.${minor}`;
  if (Bun.which(name) && runs(name)) return name;
  const versions = join(process.env.PYENV_ROOT ?? join(homedir(), ".pyenv"), "versions");
  let found: string[] = [];
  try {
    found = readdirSync(versions).filter((v) => v.startsWith(`3.${minor}.`) && /^3\.\d+\.\d+$/.test(v));
  } catch {
    // no pyenv
  }
  // The newest patch release first (3.12.10 before 3.12.9).
  found.sort((a, b) => Number(b.split(".")[2]) - Number(a.split(".")[2]));
  for (const v of found) {
    const p = join(versions, v, "bin", name);
    if (existsSync(p) && runs(p)) return p;
  }
  return null;
}
