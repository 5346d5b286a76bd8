#!/usr/bin/env bun
// The demo shipped in the package (demo/), made from a recorded run:
//   bun tools/demo-make.ts RUN.ring NVML.ndjson OUT_DIR [--max-mb 4] [--every-ms 1000]
// RUN.ring with its manifest (RUN.json) and names (RUN.names.json) beside it, as the agent keeps
// them; NVML.ndjson: `gpumem-tui --json --interval 500` documents written while it ran.
// A demo already made can be cut shorter the same way: RUN.ring.gz (its manifest and names beside
// it as demo.json, demo.names.json) and its NVML track (demo.nvml.ndjson) in place of documents.
// Writes OUT_DIR/demo.ring.gz (the ring cut by tools/ring-cut.ts at a step mark so that it stays
// under --max-mb compressed, records as written), demo.json, demo.names.json where the names were
// taken within the cut, and demo.nvml.ndjson: the NVML track (src/system/recorded.ts), one sample
// per --every-ms of the recorded process's GPUs and rows, over the cut's time.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { ACTION, newEventBatch } from "../src/ffi/events";
import { openRing } from "../src/ffi/ring";
import { DocumentSchema, type Document } from "../src/system/schema";
import { parseTrack, trackFromDocuments, trackText, TRACK_FORMAT, type NvmlTrack } from "../src/system/recorded";

process.on("uncaughtException", (e) => {
  process.stderr.write(`demo-make: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});

const argv = process.argv.slice(2);
const flag = (name: string, dflt: number) => {
  const i = argv.indexOf(name);
  if (i < 0) return dflt;
  const v = Number(argv.splice(i, 2)[1]);
  if (!(v > 0)) throw new Error(`${name} takes a positive number`);
  return v;
};
const maxBytes = flag("--max-mb", 4) * 1024 * 1024;
const everyMs = flag("--every-ms", 1000);
const [given, nvmlPath, outDir] = argv;
if (!given || !nvmlPath || !outDir || argv.length !== 3) {
  process.stderr.write("usage: bun tools/demo-make.ts RUN.ring[.gz] NVML.ndjson OUT_DIR [--max-mb 4] [--every-ms 1000]\n");
  process.exit(2);
}
const ringPath = given.endsWith(".gz") ? unpacked(given) : given;

/** A gzip ring unpacked into a temporary directory, with its manifest and names beside it (the
 *  reader maps a plain file; ring-cut copies the manifest from beside its input). */
function unpacked(gz: string): string {
  const from = gz.replace(/\.gz$/, "");
  const tmp = mkdtempSync(join(tmpdir(), "gpumem-demo-make-"));
  process.once("exit", () => rmSync(tmp, { recursive: true, force: true }));
  const to = join(tmp, basename(from));
  writeFileSync(to, Bun.gunzipSync(readFileSync(gz)));
  for (const side of [".json", ".names.json"]) {
    const path = from.replace(/\.ring$/, side);
    if (existsSync(path)) copyFileSync(path, to.replace(/\.ring$/, side));
  }
  return to;
}
const manifest = JSON.parse(readFileSync(ringPath.replace(/\.ring$/, ".json"), "utf8"));
mkdirSync(outDir, { recursive: true });

// Each step mark's record index and time, and the first record's time.
const ring = openRing(ringPath);
const batch = newEventBatch(1 << 16);
const steps: { end: number; t: number }[] = [];
let n = 0;
let first = NaN;
let last = NaN;
for (;;) {
  const { count, lost } = ring.read(batch);
  if (lost) throw new Error(`${ringPath} lapped: ${lost} records lost; record with a larger ring`);
  if (count === 0) break;
  for (let i = 0; i < count; i++) {
    if (first !== first) first = batch.time_us[i]!;
    last = batch.time_us[i]!;
    if (batch.action[i] === ACTION.step) steps.push({ end: n + i + 1, t: batch.time_us[i]! });
  }
  n += count;
}
ring.close();
if (steps.length === 0) throw new Error(`${ringPath}: no step mark`);

// Cut at the last step whose prefix compresses under the limit (compression is near-linear in
// records: estimate from the whole, then step back until it fits).
const whole = readFileSync(ringPath);
const ratio = Bun.gzipSync(whole, { level: 9 }).length / Math.max(1, n);
let k = steps.length - 1;
while (k > 0 && steps[k]!.end * ratio > maxBytes * 0.95) k--;
const cut = join(outDir, "demo.ring");
for (;;) {
  const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "ring-cut.ts"), ringPath, cut, "--steps", String(k + 1)], { stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`ring-cut failed: ${r.stderr.toString()}`);
  const gz = Bun.gzipSync(readFileSync(cut), { level: 9 });
  if (gz.length <= maxBytes || k === 0) {
    writeFileSync(`${cut}.gz`, gz);
    rmSync(cut);
    break;
  }
  k = Math.max(0, Math.floor(k * 0.9));
}
const endUs = steps[k]!.t;
writeFileSync(join(outDir, "demo.json"), `${JSON.stringify({ ...manifest, ring: "demo.ring", socket: null }, null, 1)}\n`);
const names = ringPath.replace(/\.ring$/, ".names.json");
if (existsSync(names)) {
  const saved = JSON.parse(readFileSync(names, "utf8"));
  if (typeof saved.write_index !== "number" || saved.write_index <= steps[k]!.end) copyFileSync(names, join(outDir, "demo.names.json"));
  else process.stderr.write(`names taken at record ${saved.write_index}, after the cut (${steps[k]!.end}): not shipped\n`);
}

// The track: the recorded process's rows (by its agent's pid) and its GPUs, one sample per period;
// from a track already made, its samples within the cut's time.
const pid: number = manifest.pid;
const window = { from_us: first - 2e6, to_us: endUs + 1e6 };
const nvmlText = readFileSync(nvmlPath, "utf8");
const track: NvmlTrack = nvmlText.trimStart().startsWith(`{"format":"${TRACK_FORMAT}"`) ? trackWithin(parseTrack(nvmlText, nvmlPath)) : trackOf(nvmlText);

function trackWithin(t: NvmlTrack): NvmlTrack {
  if (t.header.pid !== pid) throw new Error(`${nvmlPath}: a track of pid ${t.header.pid}, not of the ring's process (${pid})`);
  return { header: t.header, samples: t.samples.filter((s) => s.t_us >= window.from_us && s.t_us <= window.to_us) };
}

function trackOf(text: string): NvmlTrack {
  const docs: Document[] = [];
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const d = DocumentSchema.safeParse(JSON.parse(line));
    if (!d.success) throw new Error(`${nvmlPath}:${i + 1}: not a gpumem-tui document: ${d.error.issues[0]?.message}`);
    docs.push(d.data);
  }
  return trackFromDocuments(docs, { pid, ...window, every_ms: everyMs, device: manifest.devices?.[0] ?? 0 });
}
if (track.samples.length === 0) throw new Error(`${nvmlPath}: no document between the ring's first record and its cut (${new Date(first / 1000).toISOString()} … ${new Date(endUs / 1000).toISOString()}): recorded at another time?`);
writeFileSync(join(outDir, "demo.nvml.ndjson"), trackText(track));
process.stdout.write(
  `${outDir}: demo.ring.gz ${k + 1} of ${steps.length} steps (${steps[k]!.end} of ${n} records, ${((endUs - first) / 1e6).toFixed(1)} s of ${((last - first) / 1e6).toFixed(1)} s), ${track.samples.length} NVML samples\n`,
);
