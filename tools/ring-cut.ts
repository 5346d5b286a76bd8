#!/usr/bin/env bun
// A recorded ring cut to its head, for a fixture small enough to commit:
//   bun tools/ring-cut.ts IN.ring OUT.ring --steps K     up to and including the K-th step mark
//   bun tools/ring-cut.ts IN.ring OUT.ring N             the first N records
// Records are kept as written: indices, seq and times unchanged (with --steps, the sync records
// the hook writes just before a step mark are in). The header's running totals are dropped
// (n_devices 0): they are the whole run's end, not the cut's, so a replay takes its totals from
// the records and torch's own figures from their sync records; nothing is made up to look whole.
// The manifest beside IN (x.json) is copied beside OUT with its ring path pointing at OUT.
// A ring of several lanes (a live agent's, ABI 2) is first merged into one lane by the agent's own
// tool (python3 -m gpumem_agent.ring compact; PYTHON picks the interpreter): the cut is of that.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ACTION, HEADER_OFFSET, HEADER_SIZE, RECORD_OFFSET, RECORD_SIZE } from "../src/ffi/wire";

const argv = process.argv.slice(2);
const bySteps = argv[2] === "--steps";
const [inPath, outPath] = argv;
const count = Number(bySteps ? argv[3] : argv[2]);
if (!inPath || !outPath || !(Number.isInteger(count) && count > 0) || argv.length !== (bySteps ? 4 : 3)) {
  process.stderr.write("usage: bun tools/ring-cut.ts IN.ring OUT.ring (--steps K | N)\n");
  process.exit(2);
}
/** The ring's bytes, one lane: merged by the agent's compact tool where it has several. */
function oneLane(path: string): Buffer {
  const raw = readFileSync(path);
  if (raw.length < HEADER_SIZE || raw.readUInt32LE(HEADER_OFFSET.abi_version) < 2 || raw.readUInt32LE(HEADER_OFFSET.n_lanes) <= 1) return raw;
  const merged = join(mkdtempSync(join(tmpdir(), "ring-cut-")), "merged.ring");
  const agent = resolve(import.meta.dir, "..", "agent");
  const p = Bun.spawnSync([process.env.PYTHON || "python3", "-m", "gpumem_agent.ring", "compact", path, merged], { env: { ...process.env, PYTHONPATH: agent }, stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`${path} has ${raw.readUInt32LE(HEADER_OFFSET.n_lanes)} lanes and merging them failed: ${p.stderr.toString().trim()}`);
  return readFileSync(merged);
}

const src = oneLane(inPath);
const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
const capacity = Number(view.getBigUint64(HEADER_OFFSET.capacity, true));
const written = Number(view.getBigUint64(HEADER_OFFSET.write_index, true));
if (written > capacity) throw new Error(`${inPath} lapped (${written} records written, ${capacity} kept): cut a ring that holds its whole run`);
let end = bySteps ? -1 : Math.min(count, written);
let seen = 0;
for (let i = 0; i < written && (bySteps ? end < 0 : i < end); i++) {
  const at = HEADER_SIZE + i * RECORD_SIZE;
  if (Number(view.getBigUint64(at, true)) !== i + 1) throw new Error(`${inPath}: record ${i} is not whole (seq)`);
  if (bySteps && src[at + RECORD_OFFSET.action] === ACTION.step && ++seen === count) end = i + 1;
}
if (end < 0) throw new Error(`${inPath} holds ${seen} step marks, fewer than ${count}`);
let cap = 1;
while (cap < end) cap *= 2;
const out = Buffer.alloc(HEADER_SIZE + cap * RECORD_SIZE);
src.copy(out, 0, 0, HEADER_SIZE + end * RECORD_SIZE);
const o = new DataView(out.buffer, out.byteOffset, out.byteLength);
o.setBigUint64(HEADER_OFFSET.capacity, BigInt(cap), true);
o.setBigUint64(HEADER_OFFSET.write_index, BigInt(end), true);
o.setUint32(HEADER_OFFSET.n_devices, 0, true);
out.fill(0, HEADER_OFFSET.totals, HEADER_SIZE);
out[HEADER_OFFSET.closed] = 0;
writeFileSync(outPath, out);
const manifest = inPath.replace(/\.ring$/, ".json");
if (existsSync(manifest)) {
  const m = JSON.parse(readFileSync(manifest, "utf8"));
  writeFileSync(outPath.replace(/\.ring$/, ".json"), `${JSON.stringify({ ...m, ring: outPath, socket: null }, null, 1)}\n`);
}
process.stdout.write(`${outPath}: ${end} records${bySteps ? ` (${count} steps)` : ""} of ${written}, ${out.length} bytes\n`);
