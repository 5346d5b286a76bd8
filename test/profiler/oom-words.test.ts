// An OOM's finding says what was live then in the Tensors screen's words: blocks of the phase
// that was running (not yet given a category by their lifetime) are counted as what they become
// past it, as categories() counts them, never as "not yet classified" beside a screen that calls
// the same bytes `activation` or `other`.
import { describe, expect, test } from "bun:test";
import { categories, createModel, findings } from "../../src/profiler";
import { FWD, MiB, OTHER, Trace } from "./trace";

function oomIn(phase: number) {
  const tr = new Trace().segment(0x1000_0000, 1024 * MiB);
  tr.alloc(0x1000_0000, 16 * MiB); // before the step: a parameter-like block, long settled
  tr.nextStep().setPhase(phase);
  tr.alloc(0x1100_0000, 800 * MiB); // allocated in the phase that then fails
  tr.oom(4096 * MiB, 100 * MiB);
  const m = createModel();
  m.ingest(tr.batch());
  return m;
}

describe("the OOM finding's live memory, in the screens' categories", () => {
  for (const [phase, name, word] of [[FWD, "forward", "activation"], [OTHER, "outside the phases", "other"]] as const) {
    test(`an OOM ${name}: the phase's blocks are ${word}, as the Tensors screen says`, () => {
      const m = oomIn(phase);
      const oom = findings(m).find((f) => f.id === "oom")!;
      expect(oom.evidence).not.toContain("not yet classified");
      const live = /Live memory then: ([^.]+)\./.exec(oom.evidence)![1]!;
      const top = categories(m).categories[0]!;
      expect(top.category).toBe(word);
      expect(live).toStartWith(`${Math.round(top.share * 100)}% ${word}`);
    });
  }
});
