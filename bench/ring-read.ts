#!/usr/bin/env bun
// What reading a ring costs the monitor, per record, in this tree and (OLD_TREE) another checkout
// side by side in one run:
//   1. a recording (test/fixtures/hf-gpt2.ring) read whole, frees folded or not, from a private
//      copy or the file mapped: the reader's own work, everything in cache;
//   2. live rings: four writers replay that recording at 165k records/s each (bench/support/
//      busy-agents.ts, as the ranks of a four-GPU job wrote), and every second the reader takes what
//      came, folded, in batches of 65,536 and of 8,192 records (what LiveModels reads with): the
//      records come from memory another core wrote, and the batch's columns fit in cache or not.
// The reader on core 0, the writers on the others.
//   bun bench/ring-read.ts [OUT_DIR] [OLD_TREE]
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { agentDir, startWriters } from "./support/busy-agents";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const oldTree = process.argv[3] ? resolve(process.argv[3]) : null;
const here = resolve(import.meta.dir, "..");
const FIXTURE = join(here, "test", "fixtures", "hf-gpt2.ring");
const CORES = navigator.hardwareConcurrency;

interface Reader {
  read(b: unknown): { count: number };
  close(): void;
}
interface Tree {
  label: string;
  openRing: (path: string, opts: { fold?: boolean; copy?: boolean }) => Reader;
  newEventBatch: (n: number) => unknown;
}

async function load(label: string, root: string): Promise<Tree> {
  const ring = await import(join(root, "src", "ffi", "ring.ts"));
  const events = await import(join(root, "src", "ffi", "events.ts"));
  return { label, openRing: ring.openRing, newEventBatch: events.newEventBatch };
}

const trees = [await load("new", here), ...(oldTree ? [await load("old", oldTree)] : [])];

/** Best of 20 whole reads of the recording, ns a record returned. */
function recording(tree: Tree, fold: boolean, copy: boolean): number {
  const b = tree.newEventBatch(65_536);
  let best = Infinity;
  for (let k = 0; k < 20; k++) {
    const r = tree.openRing(FIXTURE, { fold, copy });
    const t = performance.now();
    let n = 0;
    for (;;) {
      const { count } = r.read(b);
      n += count;
      if (count === 0) break;
    }
    best = Math.min(best, ((performance.now() - t) * 1e6) / n);
    r.close();
  }
  return +best.toFixed(1);
}

/** Live rings: ns a record read over ten one-second rounds, after two to settle. */
async function live(tree: Tree, batch: number): Promise<{ ns_per_record: number; records: number }> {
  const dir = agentDir();
  const stop = startWriters(dir, 4, FIXTURE, 165_000, 20, CORES > 1 ? `1-${CORES - 1}` : null);
  await Bun.sleep(1500);
  const rings = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .map((f) => tree.openRing(JSON.parse(readFileSync(join(dir, f), "utf8")).ring, { fold: true }));
  const b = tree.newEventBatch(batch);
  let ms = 0;
  let records = 0;
  for (let s = 0; s < 12; s++) {
    await Bun.sleep(1000);
    for (const r of rings) {
      for (;;) {
        const t = performance.now();
        const { count } = r.read(b);
        if (s >= 2) (ms += performance.now() - t), (records += count);
        if (count === 0) break;
      }
    }
  }
  for (const r of rings) r.close();
  stop();
  return { ns_per_record: +((ms * 1e6) / records).toFixed(1), records };
}

const rows: Record<string, unknown>[] = [];
for (const tree of trees)
  for (const [fold, copy] of [[false, true], [true, true], [false, false], [true, false]] as const)
    rows.push({ tree: tree.label, what: "recording", fold, copy, ns_per_record: recording(tree, fold, copy) });
// Interleaved: new and old take turns at each batch size.
for (const batch of [65_536, 8_192]) for (const tree of trees) rows.push({ tree: tree.label, what: "live, 4 writers at 165k records/s", batch, ...(await live(tree, batch)) });

const result = {
  date: new Date().toISOString(),
  machine: `${CORES} cores, ${process.platform}/${process.arch}, bun ${Bun.version}`,
  command: `bun bench/ring-read.ts OUT${oldTree ? " OLD_TREE" : ""}`,
  rows,
};
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "ring-read.json"), `${JSON.stringify(result, null, 1)}\n`);
const md = [
  "# Reading a ring: ns a record",
  "",
  `\`${result.command}\` (${result.date}, ${result.machine}). The reader on core 0; "recording": best of 20 whole reads of test/fixtures/hf-gpt2.ring; "live": four writers replaying it at 165k records/s each, read every second, ten rounds after two.`,
  "",
  "| tree | what | fold | copy / batch | ns a record |",
  "| --- | --- | --- | --- | --- |",
  ...rows.map((r) => `| ${r.tree} | ${r.what} | ${r.fold ?? true} | ${r.copy !== undefined ? (r.copy ? "private copy" : "mapped") : `batch ${r.batch}`} | ${r.ns_per_record} |`),
  "",
];
writeFileSync(join(outDir, "ring-read.md"), md.join("\n"));
console.log(md.join("\n"));
