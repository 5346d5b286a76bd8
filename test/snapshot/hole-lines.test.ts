// Issue 37: reserved but unallocated memory, by the lines whose frees left the holes. On torch's
// own snapshots recorded on an H100 with history on (test/fixtures/snapshots): the free ranges of
// the final segments (torch's inactive blocks) and, for each address in them, the newest alloc of
// the trace there, whose frames name the line, summed by line, against what the monitor's model
// finds from its own segments and kept records (src/profiler/hole-lines.ts).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { holeLines } from "../../src/profiler/hole-lines";
import { unpickle } from "../../src/snapshot/pickle";
import { frameLabel, userFrameIndex } from "../../src/profiler/user-frame";
import { readSnapshotFile } from "../../src/snapshot/read";
import { snapshotModel } from "../../src/snapshot/view";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");

/** torch's answer: by user line, the bytes of the newest alloc at each address inside an inactive block. */
function torchHoles(root: Any): Map<string | null, number> {
  const holes: [number, number][] = [];
  for (const g of root.segments) for (const b of g.blocks) if (b.state === "inactive") holes.push([b.address, b.address + b.size]);
  const inHole = (a: number) => holes.some(([s, e]) => a >= s && a < e);
  const seen = new Set<number>();
  const out = new Map<string | null, number>();
  const trace: Any[] = root.device_traces[0];
  for (let i = trace.length - 1; i >= 0; i--) {
    const e = trace[i];
    if (e.action !== "alloc" || seen.has(e.addr)) continue;
    seen.add(e.addr);
    if (!inHole(e.addr)) continue;
    const frames = (e.frames ?? []).map((f: Any) => ({ file: f.filename, line: f.line, name: f.name }));
    const k = userFrameIndex(frames);
    const label = k < 0 ? null : frameLabel(frames[k]);
    out.set(label, (out.get(label) ?? 0) + e.size);
  }
  return out;
}

describe("the lines whose frees left the free ranges, on torch's snapshots", () => {
  for (const name of ["oom", "expandable", "midrun"])
    test(`${name}: the model's lines and bytes are torch's (allocs sized as its blocks)`, async () => {
      const parsed = await readSnapshotFile(join(DIR, `${name}.pickle.gz`));
      const { model } = snapshotModel(parsed, { keepTrace: true, resync: true });
      const ours = holeLines(model, model.devices[0]!, Infinity)!;
      // torch's file read as a plain tree, apart from the model's reader
      const truth = torchHoles(unpickle(gunzipSync(readFileSync(join(DIR, `${name}.pickle.gz`)))));
      expect(ours.lines.map((l) => l.label)).toEqual([...truth.keys()].filter((k) => k !== null).sort((a, b) => truth.get(b)! - truth.get(a)! || (a! < b! ? -1 : 1)));
      // each line's bytes: torch's requests rounded as its blocks are (within 512 B a block)
      for (const l of ours.lines) expect(Math.abs(l.bytes - truth.get(l.label)!)).toBeLessThanOrEqual(512 * l.blocks);
      expect(ours.lines.length).toBeGreaterThan(1);
    });
});
