// Opening a recording for replay: a ring file (a live one, or a fixture saved by the agent, with
// its manifest beside it: `x.ring` → `x.json`, for the range names), or a PyTorch memory snapshot
// (pickle, optionally gzip), whose device_traces play through the same model.
import { closeSync, existsSync, statSync } from "node:fs";
import { RING_MAGIC } from "../ffi/events";
import { openRing, openRingBuffer, type RingReader } from "../ffi/ring";
import { readRingGz } from "./ring-gz";
import { openRegular, readHead, readSmallText } from "../snapshot/input-file";
import type { EventSource, SavedNames, Seed, SnapshotSegment } from "../profiler";
import { MAX_MANIFEST_BYTES, parseManifest, type Manifest } from "../system/manifest";
import { readSnapshotFile } from "../snapshot/read";
import { beforeNote, beforeSummary, blockStacksOf, replayOf } from "../snapshot/view";
import type { BlockStacks } from "../profiler/user-frame";
import { formatBytes } from "../words";
import { manifestStacks, withSeedStacks } from "./manifest-stacks";
import { readSeedFile, seedBeside } from "./seed-file";

export interface Recording {
  path: string;
  kind: "ring" | "snapshot";
  source: EventSource;
  manifest: Manifest | null;
  ranges: Record<string, string>;
  /** A snapshot's segments: the block detail at its end, for resynchronizing the model. */
  segments: SnapshotSegment[] | null;
  /** The agent's names saved beside a ring (`x.names.json`), applied where they were taken. */
  names: SavedNames[];
  /** What a viewer should be told once (a ring without its manifest shows ranges by number). */
  notes: string[];
  /** A snapshot's memory from before its recording began, per device (null for a ring). */
  before: ReturnType<typeof import("../snapshot/view").beforeSummary> | null;
  /** A snapshot's stacks: where its blocks alive at the end were allocated (null for a ring). */
  stacks: BlockStacks | null;
  /** An attach's seed beside a ring (`x.seed.json`), set in the model before its records (null: none). */
  seed: Seed | null;
  close(): void;
}

/** `x.names.json` beside `x.ring`: {"names": [tensors…], "write_index": W} (W absent: the end). */
function readNames(path: string): SavedNames[] {
  if (!existsSync(path)) return [];
  let raw: { names?: unknown; write_index?: unknown };
  try {
    raw = JSON.parse(readSmallText(path, "saved names", MAX_JSON_BYTES));
  } catch (e) {
    throw new Error(`${path}: the saved names are not JSON: ${(e as Error).message}`);
  }
  if (!raw || !Array.isArray(raw.names)) throw new Error(`${path}: the saved names need a "names" list (the agent's names reply)`);
  return [{ tensors: raw.names as SavedNames["tensors"], write_index: typeof raw.write_index === "number" ? raw.write_index : null }];
}


/** An attach recording's seed beside its ring (seed-file.ts), read as live reads an agent's. One
 *  that cannot be read, or is not the one the manifest names (another size), is refused in one
 *  note and the replay goes on without it: totals are then the hook's, as without a seed. */
function readSeedBeside(ringName: string, manifest: Manifest | null): { seed: Seed | null; note: string | null } {
  const path = seedBeside(ringName);
  const hook = "the blocks from before the attach are not known and the totals are the hook's";
  if (path === null || !existsSync(path)) {
    return { seed: null, note: manifest?.seed ? `no seed beside the ring (${path ?? `${ringName}.seed.json`}; its manifest names ${manifest.seed.path}): ${hook}` : null };
  }
  try {
    const size = statSync(path).size;
    if (manifest?.seed && size !== manifest.seed.bytes) throw new Error(`${path} is ${size} bytes where the manifest's seed was ${manifest.seed.bytes}: not this recording's seed`);
    return { seed: readSeedFile(path), note: null };
  } catch (e) {
    return { seed: null, note: `seed refused: ${(e as Error).message}; ${hook}` };
  }
}

/** Saved names read beside a recording: a larger file is refused (its manifest: MAX_MANIFEST_BYTES). */
const MAX_JSON_BYTES = 64 * 1024 ** 2;

/** The first `n` bytes of a regular file (anything else is refused before it can block). */
function head(path: string, n: number): Buffer {
  const { fd } = openRegular(path, "recording");
  try {
    return Buffer.from(readHead(fd, n));
  } finally {
    closeSync(fd);
  }
}

/** A ring recording, plain or gzip-compressed (synchronous: what the demo opens). */
export function openRingRecording(path: string): Recording {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
  const gz = path.endsWith(".gz");
  // Replayed into a model (frees folded), from private memory: nothing can cut or change it under
  // the reader. A gzip'd ring is decompressed into memory under a cap, never to a temporary file.
  let ring: RingReader;
  if (gz) ring = openRingBuffer(readRingGz(path), path, { fold: true });
  else {
    if (head(path, 8).toString("latin1") !== RING_MAGIC) throw new Error(`${path} is not a gpumem-tui ring recording (its first bytes are not the ring magic)`);
    ring = openRing(path, { fold: true, copy: true });
  }
  // The files beside it are named from `x.ring` (x.ring.gz's too); the recording keeps the name it was given.
  const ringName = gz ? path.replace(/\.gz$/, "") : path;
  const manifestPath = ringName.replace(/\.ring$/, ".json");
  let manifest: Manifest | null = null;
  if (manifestPath !== ringName && existsSync(manifestPath)) {
    manifest = parseManifest(readSmallText(manifestPath, "manifest", MAX_MANIFEST_BYTES), manifestPath);
  }
  const notes = manifest ? [] : [`${path}: no manifest beside it (${manifestPath}): record_function ranges show by number`];
  const names = readNames(ringName.replace(/\.ring$/, ".names.json"));
  const { seed, note } = readSeedBeside(ringName, manifest);
  if (note) notes.push(note);
  return { path, kind: "ring", source: ring, manifest, ranges: manifest?.ranges ?? {}, segments: null, names, notes, before: null, stacks: withSeedStacks(manifestStacks(manifest), seed), seed, close: () => ring.close() };
}

/** A ring recording or a PyTorch memory snapshot, told apart by their first bytes. */
export async function openRecording(path: string): Promise<Recording> {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
  if (path.endsWith(".ring.gz") || head(path, 8).toString("latin1") === RING_MAGIC) return openRingRecording(path);
  let parsed: Awaited<ReturnType<typeof readSnapshotFile>>;
  try {
    parsed = await readSnapshotFile(path);
  } catch (e) {
    if (/not a pickle/.test((e as Error).message)) throw new Error(`${path} is neither a gpumem-tui ring recording nor a PyTorch memory snapshot (.pickle, optionally gzip)`);
    throw e;
  }
  if (!Array.isArray(parsed.root.device_traces)) {
    throw new Error(`${path} is neither a gpumem-tui ring nor a PyTorch memory snapshot with a trace (device_traces)`);
  }
  // The trace starts from the memory that existed before it: the replay ends on the segments' totals.
  const r = replayOf(parsed);
  const note = beforeNote(r, formatBytes);
  const segments = parsed.root.segments as unknown as SnapshotSegment[];
  return { path, kind: "snapshot", source: r.source, manifest: null, ranges: r.ranges, segments, names: [], notes: note ? [note] : [], before: beforeSummary(r), stacks: blockStacksOf(parsed), seed: null, close: () => {} };
}
