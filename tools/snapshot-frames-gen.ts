// A large snapshot whose every trace entry carries frames, made of a real one: the last step of
// test/fixtures/snapshots/stacks-python (a transformers GPT-2 and AdamW on an H100, a step that
// allocates and frees as much as it holds) repeated step after step, at the same addresses as a
// training loop reuses them, its annotations with it. Entries that torch recorded without frames
// (autograd's thread runs no Python) take the frames the stacks="all" recording of the same run
// has for the same entry (its C++ frames), so that every entry has some. The final segments are
// the fixture's: the replay ends on them exactly, as it does on the fixture.
//
// Written (pickler.ts) as Python's pickler writes what torch.cuda.memory._dump_snapshot hands it
// (protocol 4, 64 KiB FRAMEs, every dict, list and new string memoized, shared frame dicts and
// repeated keys read back with BINGET, a fresh frames list per context and step, free_requested and
// free_completed of a block sharing one as torch's do). With --fresh-frames every frames list has
// dicts of its own (its strings still shared), as some writers lay frames out: the reader must not
// keep a dict per frame per entry.
//   bun tools/snapshot-frames-gen.ts OUT.pickle [ENTRIES] [--fresh-frames]   (default 1,500,000)
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { unpickle, type PickleValue } from "../src/snapshot/pickle";
import { OP, Pickler } from "./pickler";

const FIXTURES = join(import.meta.dir, "..", "test", "fixtures", "snapshots");

type Obj = { [k: string]: PickleValue };

const fixture = (name: string) => unpickle(gunzipSync(require("node:fs").readFileSync(join(FIXTURES, `${name}.pickle.gz`)))) as Obj;

export interface FramesSnapshot {
  bytes: number;
  entries: number;
  steps: number;
  annotations: number;
}

/** Write a snapshot of about `entries` trace entries, every one with frames, to `path`. */
export function writeFramesSnapshot(path: string, entries: number, freshFrames = false): FramesSnapshot {
  const py = fixture("stacks-python");
  const all = fixture("stacks-all");
  const trace = (py.device_traces as PickleValue[])[0] as Obj[];
  const traceAll = (all.device_traces as PickleValue[])[0] as Obj[];
  const anns = py.external_annotations as Obj[];
  // The last step: from the last `data` range on, the dump's own `snapshot` entry left out.
  const start = anns.filter((a) => a.name === "data" && a.stage === "START").at(-1)!.time_us as number;
  const first = trace.findIndex((e) => (e.time_us as number) >= start);
  const step = trace.slice(first).filter((e) => e.action !== "snapshot");
  const stepAll = traceAll.slice(first, first + step.length);
  const stepAnns = anns.filter((a) => (a.time_us as number) >= start);
  const t0 = Math.min(step[0]!.time_us as number, stepAnns[0]!.time_us as number);
  const period = (step.at(-1)!.time_us as number) - t0 + 1000;
  // Each entry's frames: its own, else those of the stacks="all" run's same entry.
  const frames = step.map((e, k) => {
    const own = e.frames as PickleValue[] | undefined;
    if (own && own.length) return own;
    const other = stepAll[k]!;
    if (other.action !== e.action || other.size !== e.size) throw new Error(`stacks-all's entry ${first + k} is not stacks-python's`);
    return (other.frames as PickleValue[] | undefined) ?? [];
  });

  const p = Pickler.beginDict(path);
  p.str("segments");
  p.value(py.segments!);
  p.endOfItem();
  p.str("device_traces");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  p.op(OP.EMPTY_LIST);
  p.memoize();
  const steps = Math.max(1, Math.round(entries / step.length));
  let inBatch = 0;
  const annsOut: Obj[] = [];
  for (let s = 0; s < steps; s++) {
    const shift = s * period - (steps - 1) * period; // the last step keeps the fixture's times
    // A fresh list per context and step; a block's two frees share theirs, as torch's do.
    const lists = new Map<PickleValue[], number>();
    for (let k = 0; k < step.length; k++) {
      const e = step[k]!;
      if (inBatch === 0) p.op(OP.MARK);
      p.op(OP.EMPTY_DICT);
      p.memoize();
      p.op(OP.MARK);
      for (const key of ["action", "addr", "size", "stream", "time_us"]) (p.str(key), p.value(key === "time_us" ? (e.time_us as number) + shift : e[key]!));
      p.str("compile_context");
      p.newStr("N/A");
      p.str("user_metadata");
      p.newStr("");
      p.str("frames");
      const own = (e.frames as PickleValue[] | undefined) ?? frames[k]!;
      const at = lists.get(own);
      if (at !== undefined) p.get(at);
      else {
        p.op(OP.EMPTY_LIST);
        lists.set(own, p.memoize());
        if (frames[k]!.length) p.items(frames[k]!, freshFrames);
      }
      p.op(OP.SETITEMS);
      if (++inBatch === 1000) (p.op(OP.APPENDS), (inBatch = 0));
      p.endOfItem();
    }
    for (const a of stepAnns) annsOut.push({ ...a, time_us: (a.time_us as number) + shift });
  }
  if (inBatch > 0) p.op(OP.APPENDS);
  p.op(OP.APPEND);
  p.str("allocator_settings");
  p.value(py.allocator_settings ?? {});
  p.str("external_annotations");
  p.op(OP.EMPTY_LIST);
  p.memoize();
  for (let i = 0; i < annsOut.length; i += 1000) {
    p.op(OP.MARK);
    for (const a of annsOut.slice(i, i + 1000)) (p.value(a), p.endOfItem());
    p.op(OP.APPENDS);
  }
  p.endDict();
  return { bytes: p.written, entries: steps * step.length, steps, annotations: annsOut.length };
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: bun tools/snapshot-frames-gen.ts OUT.pickle [ENTRIES] [--fresh-frames]");
  const n = process.argv.slice(3).find((a) => /^\d+$/.test(a));
  console.log(JSON.stringify(writeFramesSnapshot(out, Number(n ?? 1_500_000), process.argv.includes("--fresh-frames"))));
}
