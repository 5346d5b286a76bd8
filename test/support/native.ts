// Builds the test-only C programs (the ring producer) once per test run.
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NATIVE_DIR, ROOT } from "../../src/ffi/build";

const dir = mkdtempSync(join(tmpdir(), "gpumem-test-"));
const built = new Map<string, string>();

export function tmpPath(name: string): string {
  return join(dir, name);
}

/** Compile test/support/<name>.c against cuda/ and return the binary's path. */
export function buildTool(name: string): string {
  const cached = built.get(name);
  if (cached) return cached;
  const out = join(dir, name);
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
export function buildLibrary(name: string): string {
  const key = `${name}.so`;
  const cached = built.get(key);
  if (cached) return cached;
  const out = join(dir, key);
  const src = join(ROOT, "test", "support", `${name}.c`);
  // The hook double captures Python stacks with the hook's own walker (cuda/pystack.c), against the
  // headers of the python3 its tests run.
  const py = name === "hook_double" ? ["-I", pythonInclude(), join(NATIVE_DIR, "pystack.c")] : [];
  const proc = Bun.spawnSync(["cc", "-std=c11", "-O2", "-Wall", "-shared", "-fPIC", "-I", NATIVE_DIR, ...py, src, "-o", out, ...(py.length ? ["-ldl"] : [])], { stderr: "pipe" });
  if (proc.exitCode !== 0) throw new Error(`building ${name}.c failed:\n${proc.stderr}`);
  chmodSync(out, 0o700);
  built.set(key, out);
  return out;
}

/** The include folder of the python3 on PATH (Python.h), for C built against the interpreter. */
function pythonInclude(): string {
  const p = Bun.spawnSync(["python3", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`python3 did not say where its headers are: ${p.stderr}`);
  return p.stdout.toString().trim();
}
