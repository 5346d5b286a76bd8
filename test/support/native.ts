// Builds the test-only C programs (the ring producer) once per test run.
import { mkdtempSync } from "node:fs";
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
