#!/usr/bin/env bun
// How long the stretches of allocator records are on every committed ring (one device, one step,
// phase and range: DeviceState.allocatorRecords takes one a call), and how many records each call
// of the native ingest core (cuda/ingest_core.c) takes: what its fixed cost a call (the FFI call,
// the state block written and read back) is spread over. Fed as the reader gives them (big
// batches), every stretch through the core (GPUMEM_NATIVE_CORE=1).
//   bun bench/ingest-stretches.ts [OUT_DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as profiler from "../src/profiler";
import * as recording from "../src/collect/recording";
import * as events from "../src/ffi/events";
import { recordFields } from "../src/system/manifest";
import { DeviceState } from "../src/profiler/device";
import { CoreTables, S } from "../src/profiler/device-core";
import { INGEST_EXIT_NAMES } from "../src/ffi/ingest-wire";
import { ROOT } from "../src/ffi/build";
import { ringPaths } from "../test/support/model-documents";

const outDir = process.argv[2] ?? null;
process.env.GPUMEM_NATIVE_CORE = "1";
let stretches = 0;
let records = 0;
let calls = 0;
let left = 0;
const exits: Record<string, number> = {};
// counted around the method, as it is: a call with `one` is a record the core left to the loop
const ar = DeviceState.prototype.allocatorRecords;
let depth = 0;
DeviceState.prototype.allocatorRecords = function (this: DeviceState, ...a: Parameters<typeof ar>) {
  if (a[8]) left++;
  else if (depth === 0) stretches++;
  depth++;
  const to = ar.apply(this, a);
  depth--;
  if (!a[8] && depth === 0) records += to - a[1];
  return to;
};
const useParts = CoreTables.prototype.useParts;
CoreTables.prototype.useParts = function (this: CoreTables, p) {
  useParts.call(this, p);
  const core = this.core as { run: (c: never, s: never) => number; counted?: boolean };
  if (core.counted) return;
  const run = core.run;
  core.run = (c, s) => {
    calls++;
    const got = run(c, s);
    const why = INGEST_EXIT_NAMES[this.state[S.why]!] ?? "?";
    exits[why] = (exits[why] ?? 0) + 1;
    return got;
  };
  core.counted = true;
};

const rows = [];
for (const [name, path] of ringPaths(ROOT)) {
  stretches = records = calls = left = 0;
  for (const k of Object.keys(exits)) delete exits[k];
  const rec = recording.openRingRecording(path);
  let total = 0;
  try {
    const m = profiler.createModel();
    m.setRecordFields(recordFields(rec.manifest));
    if (rec.seed) m.setSeed(rec.seed);
    for (;;) {
      const b = events.newEventBatch(65_536);
      const { count, lost } = rec.source.read(b);
      if (count === 0 && lost === 0) break;
      m.ingest(b, lost, 0, count);
      total += count;
    }
  } finally {
    rec.close();
  }
  const row = { ring: name, records: total, allocator_records: records, stretches, per_stretch: +(records / stretches).toFixed(1), core_calls: calls, per_call: +(records / Math.max(1, calls)).toFixed(1), left_to_the_loop: left, exits: { ...exits } };
  rows.push(row);
  console.log(`${name.padEnd(20)} ${String(records).padStart(6)} allocator records, ${String(stretches).padStart(5)} stretches (${row.per_stretch} each), ${String(calls).padStart(5)} core calls (${row.per_call} each), ${left} left to the loop`);
}
if (outDir) {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, "stretches.json"), `${JSON.stringify({ date: new Date().toISOString(), command: "bun bench/ingest-stretches.ts OUT", rows }, null, 1)}\n`);
}
