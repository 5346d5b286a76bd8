// A recorded ring planted as a live process's agent (a `sleep` standing in for the program): the
// ring copied into the agents' directory, its header's pid made the process's, and the recording's
// manifest beside it with `extra` fields (notes, hook_error…). What the monitor then finds is
// what it finds for a real agent.
import { closeSync, copyFileSync, openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { join, resolve } from "node:path";

const FIX = join(import.meta.dir, "..", "fixtures");

/** `pid`'s agent in `dir` from test/fixtures/`name`.ring and `name`.json (or, `name` a path, the
 *  recording NAME.ring and NAME.json there); returns its ring's path. */
export function plantAgent(dir: string, pid: number, extra: Record<string, unknown> = {}, name = "normal"): string {
  const ring = join(dir, `${pid}.ring`);
  copyFileSync(resolve(FIX, `${name}.ring`), ring);
  const fd = openSync(ring, "r+");
  const b = Buffer.alloc(4);
  b.writeInt32LE(pid);
  writeSync(fd, b, 0, 4, 32); // gpumem_header.pid
  closeSync(fd);
  writePlantedManifest(dir, pid, ring, extra, name);
  return ring;
}

/** The manifest of a planted agent (written again when a test changes it). */
export function writePlantedManifest(dir: string, pid: number, ring: string, extra: Record<string, unknown> = {}, name = "normal"): string {
  const path = join(dir, `${pid}.json`);
  const m = { ...JSON.parse(readFileSync(resolve(FIX, `${name}.json`), "utf8")), pid, ring, socket: null, ...extra };
  writeFileSync(path, JSON.stringify(m), { mode: 0o600 });
  return path;
}
