// What folding the frees saves the model: its ingest of real recordings read every record as
// written, against the same read with each free_requested and its free_completed as one record
// (src/ffi/ring.ts `fold`), in batches of a tick at 90k records/s, interleaved, minimum of 20 rounds.
//   bun bench/fold.ts [OUT_DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { newEventBatch, type EventBatch } from "../src/ffi/events";
import { openRing } from "../src/ffi/ring";
import { createModel } from "../src/profiler";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const FIXTURES = join(import.meta.dir, "..", "test", "fixtures");
const rows: string[] = [];
const result: Record<string, unknown> = { date: new Date().toISOString(), machine: `${navigator.hardwareConcurrency} cores, bun ${Bun.version}` };

function batches(path: string, fold: boolean): EventBatch[] {
  const r = openRing(path, { fold });
  const out: EventBatch[] = [];
  for (;;) {
    const b = newEventBatch(9076);
    if (r.read(b).count === 0) break;
    out.push(b);
  }
  r.close();
  return out;
}

for (const name of ["normal.ring", "hf-gpt2.ring"]) {
  const path = join(FIXTURES, name);
  const raw = batches(path, false);
  const folded = batches(path, true);
  const loops = name === "normal.ring" ? 12 : 3;
  const run = (bs: EventBatch[]) => {
    const t0 = performance.now();
    for (let l = 0; l < loops; l++) {
      const m = createModel();
      for (const b of bs) m.ingest(b);
    }
    return performance.now() - t0;
  };
  let a = Infinity;
  let b = Infinity;
  for (let k = 0; k < 20; k++) {
    a = Math.min(a, run(raw));
    b = Math.min(b, run(folded));
  }
  const records = (bs: EventBatch[]) => bs.reduce((s, x) => s + x.count, 0);
  result[name] = { records: records(raw), records_folded: records(folded), ms_every_record: +a.toFixed(2), ms_folded: +b.toFixed(2), folded_over_every_record: +(b / a).toFixed(3) };
  rows.push(`| \`${name}\` | ${records(raw).toLocaleString("en")} | ${records(folded).toLocaleString("en")} | ${a.toFixed(1)} ms | ${b.toFixed(1)} ms | **${(b / a).toFixed(2)}×** |`);
}
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "fold.json"), `${JSON.stringify(result, null, 1)}\n`);
const md = `# The model's ingest, every record or the frees folded

Command: \`bun bench/fold.ts\` (${result.date}, ${result.machine}). The model's ingest of a recorded ring
(12 passes of \`normal.ring\`, 3 of \`hf-gpt2.ring\`, a fresh model each), read every record as written and
read with the frees folded, interleaved, minimum of 20 rounds.

| recording | records | records, folded | every record | folded | folded / every record |
| --- | ---: | ---: | ---: | ---: | ---: |
${rows.join("\n")}
`;
writeFileSync(join(outDir, "fold.md"), md);
console.log(md);
