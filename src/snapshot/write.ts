// Writing a snapshot from the monitor's own model to a file (0600, written whole then linked into
// place, or renamed over a file the user said to replace: a reader never sees half a file), and the
// sentence that says what it holds.
import { randomBytes } from "node:crypto";
import { existsSync, linkSync, mkdirSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { ProfilerModel } from "../profiler";
import { snapshotFromModel } from "./from-model";
import { pickle, type PickleData } from "./pickle-write";
import { nameRefusal, PrivateFileError, why, writePrivate } from "../system/private-file";
import { counted, formatBytes } from "../words";

export interface WrittenFile {
  path: string;
  size: number;
  trace_entries: number;
  /** The monitor's records the trace was made from, and all it saw (snapshot/from-model.ts). */
  records: number;
  records_seen: number;
  notes: string[];
}

/** Where a snapshot file is opened, said after its path. */
export const MEMORY_VIZ = "open it at https://pytorch.org/memory_viz (drag the file onto the page)";

/** `2026-11-26T08-30-12`: the local time, as a file name sorts and reads it (no `:`, which some
 *  file systems and tools refuse). */
export function localStamp(d: Date): string {
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}-${p(d.getMinutes())}-${p(d.getSeconds())}`;
}

/** DIR/PID-snapshot-<local time>.pickle, then `-2`, `-3`… for a second dump within the same second:
 *  the k-th name tried. */
export function dumpName(dir: string, pid: number, at: Date, k = 1): string {
  return join(dir, `${pid}-snapshot-${localStamp(at)}${k > 1 ? `-${k}` : ""}.pickle`);
}

/** The first dump name free now (for a file another process writes: the agent's own dump). */
export function freeDumpPath(dir: string, pid: number, at = new Date()): string {
  for (let k = 1; ; k++) {
    const path = dumpName(dir, pid, at, k);
    if (!existsSync(path)) return path;
  }
}

/** Write `model`'s snapshot as DIR/PID-snapshot-<local time>.pickle, never over an existing file. */
export function writeModelSnapshot(model: ProfilerModel, dir: string, pid: number, at = new Date()): WrittenFile {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return writeSnapshotFile(model, (k) => dumpName(dir, pid, at, k));
}

/** The sentence that says what a snapshot file holds, for `d` and `replay --snapshot`: its size,
 *  its trace entries and the monitor's records they came from (the newest, where it kept fewer
 *  than it saw; a free is two entries), then its notes, then the path on a line of its own. `why`: how it came to be written this way, first among the notes. */
export function writtenSentence(f: WrittenFile, what: string, why = ""): string {
  // Short enough for one line of an 80-column terminal where the monitor kept every record.
  const from = f.records < f.records_seen ? `the last ${f.records} of ${f.records_seen} records` : counted(f.records, "record");
  const notes = [why, ...f.notes].filter(Boolean).map((n) => ` (${n})`).join("");
  return `${what}: ${formatBytes(f.size)}, ${counted(f.trace_entries, "trace entry", "trace entries")} from ${from}${notes}\n${f.path}`;
}

/** Write `model`'s snapshot to `path`, never over a file already there: where `path` names
 *  candidates (k = 1, 2, …), at the first that does not exist; with `replace` (replay --force), a
 *  regular file at `path` is replaced whole (a link or anything else there is refused). */
export function writeSnapshotFile(model: ProfilerModel, path: string | ((k: number) => string), opts: { replace?: boolean } = {}): WrittenFile {
  const s = snapshotFromModel(model);
  const bytes = pickle(s as unknown as PickleData);
  const first = typeof path === "string" ? path : path(1);
  // The temporary name is unguessable and created exclusively, never through a link (a dump
  // directory may be shared); a failed write leaves nothing (system/private-file).
  const tmp = `${first}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writePrivate(tmp, bytes);
  } catch (e) {
    throw new Error(`cannot write the snapshot to ${first}: ${e instanceof PrivateFileError ? e.reason : why(e)}`);
  }
  let placed = first;
  try {
    if (typeof path === "string" && opts.replace) {
      refuseUnreplaceable(path);
      renameSync(tmp, path); // replaces the name, never follows it: other names of the old file keep it
    } else {
      placed = linkFirstFree(tmp, typeof path === "string" ? () => path : path, typeof path === "string" ? 1 : 1000);
      unlinkSync(tmp);
    }
  } catch (e) {
    unlinkSync(tmp);
    throw new Error(`cannot write the snapshot to ${placed}: ${e instanceof PrivateFileError ? e.reason : why(e)}`);
  }
  return { path: placed, size: bytes.length, trace_entries: s.gpumem.trace_entries, records: s.gpumem.records, records_seen: s.gpumem.records_seen, notes: s.gpumem.notes };
}

/** Links `tmp` at the first of `name(1)` … `name(tries)` that does not exist: link(2) fails where
 *  the name exists, so a name taken meanwhile is skipped, never overwritten. */
function linkFirstFree(tmp: string, name: (k: number) => string, tries: number): string {
  for (let k = 1; ; k++) {
    try {
      linkSync(tmp, name(k));
      return name(k);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST" || k >= tries) throw e;
    }
  }
}

/** What --force may replace: nothing, or a regular file (a link, a directory or a FIFO someone put
 *  at the name is said, not replaced: nameRefusal). */
function refuseUnreplaceable(path: string): void {
  const there = nameRefusal(path);
  if (there) throw new PrivateFileError(path, there);
}
