#!/usr/bin/env bun
// Checks a run of test/gpu/lanes_run.py against torch's own figures, through the monitor's reader:
//   bun test/gpu/lanes-check.ts OUT_DIR/lanes-N.facts.json
// The live ring (several lanes) and its compact copy (one lane) must hold, per device, as many
// alloc and free_requested records as torch counted (num_alloc, num_free), each device's records in
// time order, nothing lost; the model replaying the copy must end on torch's memory_allocated (its
// live blocks), with no sync record that disagreed. One JSON line; exit 1 on any failure.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { HEADER_OFFSET } from "../../src/ffi/wire";

const factsPath = process.argv[2];
if (!factsPath) {
  process.stderr.write("usage: bun test/gpu/lanes-check.ts OUT_DIR/lanes-N.facts.json\n");
  process.exit(2);
}
const facts = JSON.parse(readFileSync(factsPath, "utf8"));
const fails: string[] = [];

/** Per device: alloc and free_requested records, and records out of time order; lost overall. */
function count(path: string) {
  const r = openRing(path);
  const b = newEventBatch(4096);
  const by = new Map<number, { alloc: number; free: number; disorder: number; last: number }>();
  let lost = 0;
  let records = 0;
  for (let got = r.read(b); got.count > 0 || got.lost > 0; got = r.read(b)) {
    lost += got.lost;
    records += got.count;
    for (let i = 0; i < got.count; i++) {
      const d = b.device[i]!;
      if (d < 0 || b.action[i]! >= ACTION.phase) continue;
      const s = by.get(d) ?? { alloc: 0, free: 0, disorder: 0, last: 0 };
      if (b.action[i] === ACTION.alloc) s.alloc++;
      if (b.action[i] === ACTION.free_requested) s.free++;
      if (b.time_us[i]! < s.last) s.disorder++;
      s.last = Math.max(s.last, b.time_us[i]!);
      by.set(d, s);
    }
  }
  const next = r.next();
  const written = r.header().write_index;
  r.close();
  const n_lanes = readFileSync(path).readUInt32LE(HEADER_OFFSET.n_lanes);
  return { n_lanes, records, lost, next, written, devices: Object.fromEntries([...by].map(([d, s]) => [d, { alloc: s.alloc, free: s.free, disorder: s.disorder }])) };
}

const out: Record<string, unknown> = { facts: factsPath, mode: facts.mode, lane_written: facts.lane_written };
if (facts.mode !== "hook") fails.push(`the hook did not run: ${facts.hook_error}`);
for (const which of ["live_ring", "compact_ring"] as const) {
  try {
    const c = count(facts[which]);
    out[which] = c;
    if (c.lost !== 0) fails.push(`${which}: ${c.lost} records lost`);
    if (c.next !== c.written) fails.push(`${which}: read ${c.next} of ${c.written} records`);
    // The agent makes a lane for every visible device, used or not (a rank sees its neighbours).
    const visible = facts.visible_devices ?? facts.devices.length;
    if (which === "live_ring" && c.n_lanes !== visible + 1) fails.push(`live ring: ${c.n_lanes} lanes for ${visible} visible devices`);
    if (which === "compact_ring" && c.n_lanes !== 1) fails.push(`compact ring: ${c.n_lanes} lanes, not 1`);
    for (const d of facts.devices) {
      const got = c.devices[d.device] ?? { alloc: 0, free: 0, disorder: 0 };
      if (d.error) fails.push(`device ${d.device}: ${d.error}`);
      if (got.alloc !== d.num_alloc || got.free !== d.num_free) fails.push(`${which} device ${d.device}: ${got.alloc} alloc / ${got.free} free records, torch counted ${d.num_alloc} / ${d.num_free}`);
      if (got.disorder) fails.push(`${which} device ${d.device}: ${got.disorder} records out of time order`);
    }
  } catch (e) {
    fails.push(`${which}: ${(e as Error).message}`);
  }
}
const replay = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "..", "src", "cli.ts"), "replay", facts.compact_ring, "--json"], { stdout: "pipe", stderr: "pipe" });
const final = replay.stdout.toString().trim().split("\n").map((l) => JSON.parse(l)).find((l) => l.type === "final");
if (!final) fails.push(`replay gave no final line (exit ${replay.exitCode}): ${replay.stderr.toString().slice(-500)}`);
else {
  out.model = final.summary.devices.map((d: any) => ({ device: d.device, live_block_bytes: d.live_block_bytes, allocated_bytes: d.allocated_bytes, partial: d.partial, sync: d.sync }));
  for (const d of facts.devices) {
    const m = final.summary.devices.find((x: any) => x.device === d.device);
    if (!m) fails.push(`model: no device ${d.device}`);
    else {
      if (m.live_block_bytes !== d.memory_allocated) fails.push(`model device ${d.device}: live blocks ${m.live_block_bytes} bytes, torch memory_allocated ${d.memory_allocated}`);
      if (m.sync?.disagreed) fails.push(`model device ${d.device}: ${m.sync.disagreed} sync records disagreed`);
    }
  }
}
out.ok = fails.length === 0;
out.fails = fails;
console.log(JSON.stringify(out));
process.exit(fails.length ? 1 : 0);
