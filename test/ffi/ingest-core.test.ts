// The native ingest core (cuda/ingest_core.c) where its state is not what it can take, and where
// the library has no core: the records still reach the model, through the flat TypeScript loop,
// and the answers are the same (model-documents.test.ts holds every ring to them both ways).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as profiler from "../../src/profiler";
import * as recording from "../../src/collect/recording";
import * as events from "../../src/ffi/events";
import * as manifest from "../../src/system/manifest";
import { NATIVE_SOURCES, ROOT } from "../../src/ffi/build";
import { ingestCoreStatus } from "../../src/ffi/ingest-core";
import { INGEST_COLUMNS_OFFSET } from "../../src/ffi/ingest-wire";
import { CoreTables } from "../../src/profiler/device-core";
import { DeviceState } from "../../src/profiler/device";
import { documentsOf, ringPaths, type TreeModules } from "../support/model-documents";
import { nativeMissing, withCore } from "../support/ingest-cores";
import { tmpPath } from "../support/native";

const mods: TreeModules = { profiler, recording, events, manifest };
const DIR = join(import.meta.dir, "..", "profiler", "fixtures", "model-documents");
const want = (name: string) => new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(DIR, `${name}.json.gz`))));

describe("the native ingest core", () => {
  test("told the block table is smaller than it is, it leaves the records it cannot take to the TypeScript loop, and the answers stay the same", () => {
    // A table whose lengths disagree with the model's (the core checks every index against them
    // before a record changes anything): here every block past the table's first 8 slots is out of
    // its reach, and the records of those blocks go through the TypeScript loop, one at a time.
    const useParts = CoreTables.prototype.useParts;
    const ts = DeviceState.prototype.allocatorRecords;
    let left = 0;
    DeviceState.prototype.allocatorRecords = function (this: DeviceState, ...a: Parameters<typeof ts>) {
      if (a[8]) left++; // one record: the loop's (no seed waits in these rings)
      return ts.apply(this, a);
    };
    let narrowed = 0;
    CoreTables.prototype.useParts = function (this: CoreTables, p) {
      useParts.call(this, p);
      const columns = (this as unknown as { columns: BigUint64Array }).columns;
      columns[INGEST_COLUMNS_OFFSET.b_capacity / 8] = 8n;
      narrowed++;
    };
    try {
      for (const name of ["hf-gpt2", "rings-names", "rings-lapped", "exact-resnet50"]) {
        const path = ringPaths(ROOT).find(([n]) => n === name)![1];
        const got = `${JSON.stringify(withCore("native", () => documentsOf(mods, path, false)))}\n`;
        expect(got === want(name), name).toBe(true);
      }
    } finally {
      CoreTables.prototype.useParts = useParts;
      DeviceState.prototype.allocatorRecords = ts;
    }
    expect(nativeMissing()).toBeNull();
    if (ingestCoreStatus().native) {
      expect(narrowed).toBeGreaterThan(0);
      expect(left).toBeGreaterThan(1000);
    }
  });

  test("records at addresses still live (their frees lost: a recording fed twice), with the block table told smaller: the core and the loop answer alike", () => {
    // The second lap allocates at addresses the first left live: each such alloc leaves the core
    // (REPLACED), its old block goes, and the core takes it again with the slot it now holds,
    // which, past the table's narrowed length, leaves it to the TypeScript loop with that slot.
    const path = ringPaths(ROOT).find(([n]) => n === "hf-gpt2")![1];
    const rec = recording.openRingRecording(path);
    const all = events.newEventBatch(1 << 17);
    try {
      for (;;) {
        const b = events.newEventBatch(65_536);
        const { count, lost } = rec.source.read(b);
        if (count === 0 && lost === 0) break;
        for (const k of Object.keys(b) as (keyof events.EventBatch)[]) if (typeof b[k] !== "number") (all[k] as Float64Array).set((b[k] as Float64Array).subarray(0, count), all.count);
        all.count += count;
      }
    } finally {
      rec.close();
    }
    let maxStep = 0;
    for (let i = 0; i < all.count; i++) maxStep = Math.max(maxStep, all.step[i]!);
    const span = all.time_us[all.count - 1]! - all.time_us[0]! + 1;
    const second = events.newEventBatch(all.count);
    for (const k of Object.keys(all) as (keyof events.EventBatch)[]) if (typeof all[k] !== "number") (second[k] as Float64Array).set((all[k] as Float64Array).subarray(0, all.count));
    second.count = all.count;
    for (let i = 0; i < all.count; i++) {
      second.step[i] = all.step[i]! + maxStep + 1;
      second.time_us[i] = all.time_us[i]! + span;
    }
    const answers = (core: "native" | "ts") =>
      withCore(core, () => {
        const m = profiler.createModel().keepTrace();
        for (const b of [all, second]) for (let i = 0; i < b.count; i += 8192) m.ingest(b, 0, i, Math.min(b.count, i + 8192));
        const d = m.devices[0]!;
        return JSON.stringify({ final: profiler.finalLine(m), profile: profiler.processProfile(m), blocks: profiler.blocks(m, { device: d.device, limit: 50 }), replaced: d.replacedBlocks, version: d.version });
      });
    const useParts = CoreTables.prototype.useParts;
    const ts = DeviceState.prototype.allocatorRecords;
    let carried = 0;
    CoreTables.prototype.useParts = function (this: CoreTables, p) {
      useParts.call(this, p);
      (this as unknown as { columns: BigUint64Array }).columns[INGEST_COLUMNS_OFFSET.b_capacity / 8] = 8n;
    };
    DeviceState.prototype.allocatorRecords = function (this: DeviceState, ...a: Parameters<typeof ts>) {
      if ((this as unknown as { preSlotIn: number }).preSlotIn >= 0) carried++;
      return ts.apply(this, a);
    };
    let native: string;
    try {
      native = answers("native");
    } finally {
      CoreTables.prototype.useParts = useParts;
      DeviceState.prototype.allocatorRecords = ts;
    }
    const loop = answers("ts");
    expect(JSON.parse(loop).replaced).toBeGreaterThan(100);
    expect(native === loop).toBe(true);
    if (ingestCoreStatus().native) expect(carried).toBeGreaterThan(0);
  });

  test("a small batch whose columns move into buffers of their own after the core took their addresses (a subarray asked for): the core reads where they are", () => {
    // Typed arrays of up to some thousand elements keep their elements in the JavaScript heap until
    // their ArrayBuffer is asked for; then the elements move. The core's table must follow.
    const path = ringPaths(ROOT).find(([n]) => n === "rings-names")![1];
    const run = (core: "native" | "ts") =>
      withCore(core, () => {
        const rec = recording.openRingRecording(path);
        try {
          const m = profiler.createModel();
          m.setRecordFields(manifest.recordFields(rec.manifest));
          const b = events.newEventBatch(128); // one batch, read into again and again (as FeedSource's)
          for (;;) {
            const { count, lost } = rec.source.read(b);
            if (count === 0 && lost === 0) break;
            m.ingest(b, lost, 0, count >> 1);
            for (const k of Object.keys(b) as (keyof events.EventBatch)[]) if (typeof b[k] !== "number") (b[k] as Float64Array).subarray(0, 1);
            m.ingest(b, 0, count >> 1, count);
          }
          const d = m.devices[0]!;
          return JSON.stringify({ final: profiler.finalLine(m), blocks: profiler.blocks(m, { device: d.device, limit: 50 }) });
        } finally {
          rec.close();
        }
      });
    expect(run("native") === run("ts")).toBe(true);
    expect(nativeMissing()).toBeNull();
  });

  test("records no writer makes (addresses and sizes negative, fractional, NaN, past 2^53; frees of blocks never seen; a segment now and then): the core and the loop answer alike", () => {
    // A fixed pseudo-random stream (no hand-written GPU data: values a damaged ring could carry),
    // every stretch through the core against the loop alone.
    const stream = (oddRate: number) => {
      let x = 0x9e3779b9;
      const rand = () => {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        return (x >>> 0) / 4294967296;
      };
      const odd = [-1, -512, 0.5, NaN, Infinity, 2 ** 53, 2 ** 60, 2 ** 64, -0];
      const base = 0x7f0000000000;
      const n = 20_000;
      const b = events.newEventBatch(n);
      const actions = [events.ACTION.alloc, events.ACTION.alloc, events.ACTION.free, events.ACTION.free_requested, events.ACTION.free_completed, events.ACTION.segment_alloc];
      for (let i = 0; i < n; i++) {
        b.time_us[i] = 1e15 + i;
        b.action[i] = actions[Math.floor(rand() * actions.length)]!;
        b.device[i] = 0;
        b.step[i] = Math.floor(i / 2000);
        b.phase[i] = Math.floor(i / 500) % 4;
        b.address[i] = rand() < oddRate ? odd[Math.floor(rand() * odd.length)]! : base + Math.floor(rand() * 64) * 2 ** 21 + (rand() < 0.5 ? 0 : 2 ** 20);
        b.size[i] = rand() < oddRate ? odd[Math.floor(rand() * odd.length)]! : b.action[i] === events.ACTION.segment_alloc ? 2 ** 21 * (1 + Math.floor(rand() * 8)) : Math.floor(rand() * 2 ** (10 + rand() * 14));
        b.extra[i] = b.time_us[i]! + 1;
        b.line[i] = rand() < 0.01 ? 1 : 0;
      }
      b.count = n;
      return b;
    };
    const answers = (b: events.EventBatch, core: "native" | "ts") =>
      withCore(core, () => {
        const m = profiler.createModel().keepTrace();
        for (let i = 0; i < b.count; i += 1000) m.ingest(b, 0, i, i + 1000);
        const d = m.devices[0]!;
        return JSON.stringify({ final: profiler.finalLine(m), profile: profiler.processProfile(m), blocks: profiler.blocks(m, { device: d.device, limit: 100 }), block: [...m.tail!.block.subarray(0, b.count)], version: d.version, unknown: d.unknownFrees, unknownBytes: d.unknownFreeBytes, replaced: d.replacedBlocks, allocated: d.allocated, active: d.active, requested: d.requested });
      });
    // with odd values (NaN spreads through the sums: the same NaN both ways) and without (every sum a number)
    for (const rate of [0.03, 0]) {
      const b = stream(rate);
      expect(answers(b, "native") === answers(b, "ts"), `odd values at ${rate}`).toBe(true);
    }
    expect(nativeMissing()).toBeNull();
  });

  test("a library without the core (one built before it): the TypeScript loop takes the records, the same answers, and the status says why", () => {
    const lib = tmpPath("libgpumem-no-core.so");
    const cc = Bun.spawnSync(["cc", "-std=c11", "-O2", "-fPIC", "-shared", "-o", lib, ...NATIVE_SOURCES.filter((f) => !f.endsWith("/ingest_core.c")), "-ldl", "-lpthread", "-lm"], { stderr: "pipe" });
    expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    const script = `
      import * as profiler from "${ROOT}/src/profiler";
      import * as recording from "${ROOT}/src/collect/recording";
      import * as events from "${ROOT}/src/ffi/events";
      import * as manifest from "${ROOT}/src/system/manifest";
      import { ingestCoreStatus } from "${ROOT}/src/ffi/ingest-core";
      import { documentsOf, ringPaths } from "${ROOT}/test/support/model-documents";
      const path = ringPaths("${ROOT}").find(([n]) => n === "rings-names")[1];
      const docs = documentsOf({ profiler, recording, events, manifest }, path, false);
      process.stdout.write(JSON.stringify({ status: ingestCoreStatus(), docs: JSON.stringify(docs) + "\\n" }));
    `;
    const p = Bun.spawnSync(["bun", "-e", script], { env: { ...process.env, GPUMEM_LIB: lib, GPUMEM_NATIVE_CORE: "" }, stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const out = JSON.parse(p.stdout.toString()) as { status: { native: boolean; why: string | null }; docs: string };
    expect(out.status.native).toBe(false);
    expect(out.status.why).toContain("gpumem_ingest_run");
    expect(out.status.why).toContain("TypeScript loop");
    expect(out.docs === want("rings-names")).toBe(true);
  });
});
