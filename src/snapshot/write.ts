// Writing a snapshot from the monitor's own model to a file (0600, written whole then renamed:
// a reader never sees half a file).
import { randomBytes } from "node:crypto";
import { mkdirSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { ProfilerModel } from "../profiler";
import { snapshotFromModel } from "./from-model";
import { pickle, type PickleData } from "./pickle-write";
import { PrivateFileError, why, writePrivate } from "../system/private-file";

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
  // The temporary name is unguessable and created exclusively, never through a link (a dump
  // directory may be shared); a failed write leaves nothing (system/private-file).
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writePrivate(tmp, bytes);
  } catch (e) {
    throw new Error(`cannot write the snapshot to ${path}: ${e instanceof PrivateFileError ? e.reason : why(e)}`);
  }
  try {
    renameSync(tmp, path); // replaces a link at `path`, never follows it
  } catch (e) {
    unlinkSync(tmp);
    throw new Error(`cannot write the snapshot to ${path}: ${why(e)}`);
  }
  return { path, size: bytes.length, trace_entries: s.gpumem.trace_entries, notes: s.gpumem.notes };
}
