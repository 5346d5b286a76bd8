// Opening a snapshot file: read (bounded), decompress, parse safely, summarize.
import { statSync } from "node:fs";
import { RING_MAGIC } from "../ffi/events";
import { decompress, SnapshotError, unpickle, type PickleValue } from "./pickle";
import { summarize, type SnapshotSummary } from "./summary";

export const MAX_SNAPSHOT_BYTES = 2 * 1024 ** 3;

export async function readSnapshot(path: string): Promise<PickleValue> {
  let size: number;
  try {
    const st = statSync(path);
    if (st.isDirectory()) throw new SnapshotError(`${path} is a directory, not a snapshot file`);
    size = st.size;
  } catch (e) {
    if (e instanceof SnapshotError) throw e;
    throw new SnapshotError(`${path}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message}`);
  }
  if (size > MAX_SNAPSHOT_BYTES) throw new SnapshotError(`${path} is ${size} bytes: larger than the ${MAX_SNAPSHOT_BYTES}-byte limit`);
  const data = new Uint8Array(await Bun.file(path).arrayBuffer());
  if (new TextDecoder("latin1").decode(data.subarray(0, 8)) === RING_MAGIC) {
    throw new SnapshotError(`${path} is a gpumem-tui ring recording, not a snapshot: \`gpumem-tui replay ${path}\` plays it, and with \`--snapshot OUT\` writes one`);
  }
  try {
    return unpickle(decompress(data));
  } catch (e) {
    if (e instanceof SnapshotError) throw new SnapshotError(`${path}: ${e.message}`);
    throw e;
  }
}

export async function viewJson(path: string): Promise<{ file: string; bytes: number } & SnapshotSummary> {
  const snap = await readSnapshot(path);
  try {
    return { file: path, bytes: statSync(path).size, ...summarize(snap) };
  } catch (e) {
    if (e instanceof SnapshotError) throw new SnapshotError(`${path}: ${e.message}`);
    throw e;
  }
}
