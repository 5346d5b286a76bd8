// The ledger in Prometheus: one gpumem_ledger_bytes series per row (kind, component labels beside
// the process's own), summing to gpumem_process_gpu_memory_bytes, on the last document of the
// H200 torch.compile reduce-overhead run with the ledger its ring and NVML samples give.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { exposition } from "../../src/headless/prometheus";
import { DocumentSchema, type Document } from "../../src/system/schema";
import { documentSamples, replayLedger } from "../support/ledger-replay";

const FX = join(import.meta.dir, "..", "fixtures");

test("a series per ledger row, labelled with its kind and name, summing to the process's NVML used", () => {
  const lines = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(FX, "compile-graphs.run.ndjson.gz")))).trim().split("\n");
  const samples = documentSamples(join(FX, "compile-graphs.run.ndjson.gz"), 558);
  const { at } = replayLedger(join(FX, "compile-graphs.ring.gz"), join(FX, "compile-graphs.json"), samples);
  const last = at[at.length - 1]!;
  const doc = JSON.parse(lines.findLast((l) => l.includes('"pid":558') && l.includes(`"time_unix_ms":${last.time_us / 1000}`))!) as Document;
  const p = doc.processes.find((x) => x.pid === 558)!;
  p.pytorch!.ledger = last.ledger;
  DocumentSchema.parse(doc); // the ledger as the schema has it
  const text = exposition(doc);
  expect(text).toContain("# TYPE gpumem_ledger_bytes gauge");
  const rows = [...text.matchAll(/^gpumem_ledger_bytes\{([^}]*)\} (-?\d+)$/gm)];
  expect(rows.map((m) => m[1]!.match(/kind="(\w+)"/)![1])).toEqual(["allocated", "reserved_unallocated", "private_pool", "context", "unexplained"]);
  for (const m of rows) expect(m[1]).toMatch(/hostname="[^"]+",gpu="0",uuid="GPU-[^"]+",pid="558",process="python3",kind="\w+",component="[^"]+"/);
  expect(text).toContain('component="private pool (0, 1)"} 136314880');
  const total = Number(text.match(/^gpumem_process_gpu_memory_bytes\{[^}]*pid="558"[^}]*\} (\d+)$/m)![1]);
  expect(rows.reduce((s, m) => s + Number(m[2]), 0)).toBe(total);
});
