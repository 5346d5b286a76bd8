// Opening a recording for replay: a ring file (a live one, or a fixture saved by the agent), with
// its manifest beside it (`x.ring` → `x.json`) for the range names.
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { openRing } from "../ffi/ring";
import type { EventSource } from "../profiler/replay";
import type { Manifest } from "./manifest";

export interface Recording {
  path: string;
  kind: "ring";
  source: EventSource;
  manifest: Manifest | null;
  ranges: Record<string, string>;
  close(): void;
}

const RING_MAGIC = "PGMPRNG1"; // GPUMEM_RING_MAGIC as it lies in the file

function head(path: string, n: number): Buffer {
  const fd = openSync(path, "r");
  try {
    const b = Buffer.alloc(n);
    const got = readSync(fd, b, 0, n, 0);
    return b.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

export function openRecording(path: string): Recording {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
  const magic = head(path, 8);
  if (magic.toString("latin1") !== RING_MAGIC) {
    throw new Error(`${path} is not a gpumem-tui ring recording (its first bytes are not the ring magic)`);
  }
  const ring = openRing(path);
  const manifestPath = path.replace(/\.ring$/, ".json");
  let manifest: Manifest | null = null;
  if (manifestPath !== path && existsSync(manifestPath)) {
    const { parseManifest } = require("./manifest") as typeof import("./manifest");
    manifest = parseManifest(readFileSync(manifestPath, "utf8"), manifestPath);
  }
  return { path, kind: "ring", source: ring, manifest, ranges: manifest?.ranges ?? {}, close: () => ring.close() };
}
