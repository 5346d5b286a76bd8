// Writing a snapshot from the monitor's own model to a file (0600, written whole then renamed:
// a reader never sees half a file).
import { chmodSync, mkdirSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ProfilerModel } from "../profiler";
import { snapshotFromModel } from "./from-model";
import { pickle, type PickleData } from "./pickle-write";

export interface WrittenFile {
  path: string;
  size: number;
  trace_entries: number;
  notes: string[];
}

/** Write `model`'s snapshot as DIR/PID-gpumem-MS.pickle. */
export function writeModelSnapshot(model: ProfilerModel, dir: string, pid: number, nowMs = Date.now()): WrittenFile {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return writeSnapshotFile(model, join(dir, `${pid}-gpumem-${nowMs}.pickle`));
}

/** Write `model`'s snapshot to `path`. */
export function writeSnapshotFile(model: ProfilerModel, path: string): WrittenFile {
  const s = snapshotFromModel(model);
  const bytes = pickle(s as unknown as PickleData);
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, bytes, { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, path);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    try {
      unlinkSync(tmp);
    } catch {
      // never written
    }
    const why = err.code === "ENOENT" ? "its directory does not exist" : err.code === "EACCES" ? "permission denied" : err.message;
    throw new Error(`cannot write the snapshot to ${path}: ${why}`);
  }
  return { path, size: bytes.length, trace_entries: s.gpumem.trace_entries, notes: s.gpumem.notes };
}
