// Opening a 100 MB memory snapshot: gpumem-tui's parse + summary against Python's pickle.load of
// the same file, interleaved, medians.
//   bun bench/snapshot-view.ts [OUT_DIR]
// The file is made from the snapshot recorded on an H100 (test/fixtures/normal-history.pickle),
// its trace repeated until the pickle passes 100 MB (fresh objects each time, as a long history
// has), so its shape is a real snapshot's.
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { viewJson } from "../src/snapshot/view";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const big = join(tmpdir(), "gpumem-bench-100mb.pickle");
const src = join(import.meta.dir, "..", "test", "fixtures", "normal-history.pickle");
const make = Bun.spawnSync([
  "python3",
  "-c",
  `import pickle, copy
d = pickle.load(open(${JSON.stringify(src)}, 'rb'))
base = d['device_traces'][0]
out = []
while True:
    out.extend(copy.deepcopy(base))
    d['device_traces'][0] = out
    if len(out) % (len(base) * 8) == 0 and len(pickle.dumps(d, protocol=4)) > 100 * 2**20: break
pickle.dump(d, open(${JSON.stringify(big)}, 'wb'), protocol=4)
print(len(out))`,
]);
if (make.exitCode !== 0) throw new Error(make.stderr.toString());
const entries = Number(make.stdout.toString().trim());
const bytes = statSync(big).size;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ours: number[] = [];
const python: number[] = [];
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  const s = await viewJson(big);
  ours.push(performance.now() - t0);
  if (s.trace?.entries !== entries) throw new Error("summary miscounted the trace");
  const p = Bun.spawnSync(["python3", "-c", `import pickle, time; t=time.perf_counter(); pickle.load(open(${JSON.stringify(big)}, 'rb')); print((time.perf_counter()-t)*1000)`]);
  python.push(Number(p.stdout.toString().trim()));
}
const result = { date: new Date().toISOString(), file_bytes: bytes, trace_entries: entries, gpumem_view_ms: ours.map((x) => +x.toFixed(0)), python_pickle_load_ms: python.map((x) => +x.toFixed(0)), gpumem_median_ms: +median(ours).toFixed(0), python_median_ms: +median(python).toFixed(0), ratio_ours_over_python: +(median(ours) / median(python)).toFixed(2) };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "snapshot-view.json"), `${JSON.stringify(result, null, 2)}\n`);
const md = `# Opening a 100 MB snapshot

Command: \`bun bench/snapshot-view.ts\` (${result.date}, this repository's 2-core machine). The file: the snapshot
recorded on an H100 (test/fixtures/normal-history.pickle) with its trace repeated to ${entries.toLocaleString("en")} entries,
${(bytes / 2 ** 20).toFixed(1)} MiB. Three interleaved runs each.

| what | median |
| --- | --- |
| \`gpumem-tui view FILE --json\`'s work: read, safe parse, summary | ${result.gpumem_median_ms} ms |
| Python's \`pickle.load\` of the same file (parse only) | ${result.python_median_ms} ms |
| ratio | ${result.ratio_ours_over_python}× |

Target: under 5 s for 100 MB. Runs (ms): ours ${result.gpumem_view_ms.join(", ")}; Python ${result.python_pickle_load_ms.join(", ")}.
`;
writeFileSync(join(outDir, "snapshot-view.md"), md);
console.log(md);
