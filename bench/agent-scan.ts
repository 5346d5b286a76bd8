// The agents' directory scan the monitor makes once a tick (src/collect/agent-dirs.ts), with its
// parent full of other files as a training's /dev/shm is (a DataLoader's shared memory): the parent
// listed at every scan (a ParentListings of its own per scan, as before) beside the listing kept
// while the parent is unchanged, interleaved, one scan a round after a pause (a tick's cold caches).
//   bun bench/agent-scan.ts [OUT_DIR] [FILES]
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ParentListings, scanAgentDirs } from "../src/collect/agent-dirs";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const FILES = Number(process.argv[3] ?? 5000);
const parent = mkdtempSync(join(tmpdir(), "gpumem-bench-scan-"));
for (let i = 0; i < FILES; i++) writeFileSync(join(parent, `torch_${process.pid}_${i}`), "");
const base = join(parent, "gpumem-tui-0");
mkdirSync(base, { mode: 0o700 });
const past = new Date(Date.now() - 60_000);
utimesSync(parent, past, past); // settled, as a /dev/shm between a DataLoader's files is
const kept = new ParentListings();
const time = (f: () => void) => {
  const t = performance.now();
  f();
  return performance.now() - t;
};
const every: number[] = [];
const keptMs: number[] = [];
for (let round = 0; round < 30; round++) {
  await Bun.sleep(100);
  every.push(time(() => scanAgentDirs([base], undefined, new ParentListings())));
  await Bun.sleep(100);
  keptMs.push(time(() => scanAgentDirs([base], undefined, kept)));
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
const r = { date: new Date().toISOString(), files: FILES, listed_every_scan_ms: +median(every).toFixed(3), listing_kept_ms: +median(keptMs).toFixed(3) };
const md = `# The agents' directory scan, with a busy parent

Command: \`bun bench/agent-scan.ts OUT ${FILES}\` (${r.date}, this repository's 2-core machine). A parent holding ${FILES}
other files (a training's /dev/shm), the monitor's base directory in it; 30 rounds, each one scan
of either kind after a 100 ms pause, interleaved; medians.

| scan | median |
| --- | ---: |
| the parent listed at every scan (before) | ${r.listed_every_scan_ms} ms |
| the listing kept while the parent's mtime stays (after) | ${r.listing_kept_ms} ms |

Ratio: ${(r.listed_every_scan_ms / r.listing_kept_ms).toFixed(0)}× less per tick. The kept listing is re-read when the parent changes,
after 10 s, and never kept for a parent changed in the last second.
`;
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "agent-scan.md"), md);
writeFileSync(join(outDir, "agent-scan.json"), `${JSON.stringify(r, null, 1)}\n`);
console.log(md);
