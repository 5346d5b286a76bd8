// Every recorded ring under test/fixtures (the agent's fixtures: <name>.ring, <name>.json manifest,
// <name>.facts.json with what torch reported) replayed through the model: the totals must be
// torch's, the records must account for them, and each step's phases must add up.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { openRing } from "../../src/ffi/ring";
import { replay, type ReplayFinalLine } from "../../src/profiler";

const DIR = join(import.meta.dir, "..", "fixtures");
const rings = existsSync(DIR)
  ? readdirSync(DIR)
      .filter((f) => f.endsWith(".ring") && existsSync(join(DIR, f.replace(/\.ring$/, ".facts.json"))))
      .map((f) => f.replace(/\.ring$/, ""))
  : [];

describe("recorded rings under test/fixtures", () => {
  if (rings.length === 0) test.skip("(no recorded rings with facts under test/fixtures yet)", () => {});
  for (const name of rings) {
    test(`${name}: totals are torch's, phases add up`, async () => {
      const facts = await Bun.file(join(DIR, `${name}.facts.json`)).json();
      const manifestPath = join(DIR, `${name}.json`);
      const ranges = existsSync(manifestPath) ? ((await Bun.file(manifestPath).json()).ranges ?? {}) : {};
      const r = openRing(join(DIR, `${name}.ring`));
      let final: ReplayFinalLine | null = null;
      try {
        for await (const line of replay(r, { ranges })) if (line.type === "final") final = line;
      } finally {
        r.close();
      }
      const d = final!.summary.devices[0]!;
      if (facts.memory_allocated !== undefined) expect(d.allocated_bytes).toBe(facts.memory_allocated);
      if (facts.memory_reserved !== undefined) expect(d.reserved_bytes).toBe(facts.memory_reserved);
      if (facts.max_memory_allocated !== undefined) expect(d.peak_allocated_bytes).toBe(facts.max_memory_allocated);
      if (final!.lost_records === 0 && facts.memory_reserved !== undefined) expect(d.reserved_events_bytes).toBe(facts.memory_reserved);
      for (const dev of final!.devices)
        for (const b of [dev.last_step, dev.peak_step]) {
          expect(b.phases.reduce((s, p) => s + p.alloc_bytes, 0)).toBe(b.alloc_bytes);
          expect(b.phases.reduce((s, p) => s + p.freed_bytes, 0)).toBe(b.freed_bytes);
          expect(b.allocated_at_start_bytes + b.alloc_bytes - b.freed_bytes).toBe(b.held_at_end_bytes);
        }
    });
  }
});
