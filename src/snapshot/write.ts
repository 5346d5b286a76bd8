// Writing a snapshot from the monitor's own model to a file (0600, written whole then renamed:
// a reader never sees half a file).
import { chmodSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
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
  const s = snapshotFromModel(model);
  const bytes = pickle(s as unknown as PickleData);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, `${pid}-gpumem-${nowMs}.pickle`);
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, bytes, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
  return { path, size: bytes.length, trace_entries: s.gpumem.trace_entries, notes: s.gpumem.notes };
}
