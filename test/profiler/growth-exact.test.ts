// The growth per step a user reads is torch's own where sync records give it: a kept tensor of a
// 1.5 MiB request may sit in a 2 MiB block the allocator did not split, which the trace cannot see.
import { expect, test } from "bun:test";
import { createModel, findings } from "../../src/profiler";
import { FWD, MiB, OTHER, Trace } from "./trace";

test("a leak of 1.5 MiB requests in unsplit 2 MiB blocks grows by 2 MiB a step, as torch counts it", () => {
  const tr = new Trace().segment(0x1000_0000, 512 * MiB).sync(0, 512 * MiB, 0, 0);
  let events = 0;
  for (let s = 0; s < 12; s++) {
    tr.setPhase(FWD).alloc(0x1100_0000, 8 * MiB).free(0x1100_0000, 8 * MiB);
    tr.setPhase(OTHER).alloc(0x2000_0000 + s * 2 * MiB, 1.5 * MiB); // kept: logits[:, -1].clone()
    events += 3;
    // torch's allocated counts the whole 2 MiB block; requested, the 1.5 MiB asked for
    tr.sync((s + 1) * 2 * MiB, 512 * MiB, (s + 1) * 1.5 * MiB, events);
    tr.nextStep();
  }
  const m = createModel();
  m.ingest(tr.batch());
  const f = findings(m).find((x) => x.id === "growth")!;
  expect(f.numbers.growth_per_step_bytes).toBe(2 * MiB);
  expect(f.numbers.held_from).toBe("torch");
  expect(f.evidence).toContain("torch's memory_allocated() at the boundary");
  expect(f.evidence).toMatch(/were allocated outside forward, backward and the optimizer, outside every record_function range/);
});
