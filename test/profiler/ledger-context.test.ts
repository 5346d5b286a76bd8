// The ledger's CUDA context from two runs recorded on an H200 (test/fixtures/ledger/README.md):
// each ring replayed with the NVML samples of the monitor's own documents of the same run, held to
// the program's own figures (pynvml beside torch.cuda.memory_reserved() after torch.zeros(1) and a
// synchronize: the context 610 MiB, as a bare torch.zeros(1) process shows it).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import { documentSamples, replayLedger } from "../support/ledger-replay";
import gpt2Facts from "../fixtures/ledger/gpt2.facts.json";
import rawFacts from "../fixtures/ledger/rawmalloc.facts.json";

const FX = join(ROOT, "test", "fixtures", "ledger");
const MiB = 2 ** 20;
const sum = (rows: Array<{ bytes: number }>) => rows.reduce((s, r) => s + r.bytes, 0);
const replay = (name: string, pid: number, readWindow_us = 0) =>
  replayLedger(join(FX, `${name}.ring.gz`), join(FX, `${name}.json`), documentSamples(join(FX, `${name}.run.ndjson.gz`), pid), 0, { readWindow_us });

describe("a first NVML sample taken while the context was still being made (GPT-2 under run --json)", () => {
  const { model, at } = replay("gpt2", gpt2Facts.pid);

  test("the recording has it: NVML showed 22 MiB 49 ms before torch's first cudaMalloc, 612 MiB at the next sample", () => {
    expect(at[0]!.reserved).toBe(0);
    expect(at[0]!.ledger.nvml_used_bytes).toBe(22 * MiB);
    expect(at[1]!.reserved).toBe(2 * MiB);
    expect(at[1]!.ledger.nvml_used_bytes).toBe(612 * MiB);
  });

  test("the context is the program's own figure, 610 MiB, from the first sample after that allocation on", () => {
    expect(gpt2Facts.context_bytes).toBe(610 * MiB);
    for (const a of at.slice(1)) expect(a.ledger.rows.find((r) => r.kind === "context")!.bytes).toBe(gpt2Facts.context_bytes);
    const parts = model.ledger.parts(0)!;
    expect(parts.context_before_first_allocation).toBe(true);
    expect(parts.context_settling_bytes).toBe(588 * MiB);
    // Not a jump of unexplained memory: the 588 MiB that came with the context's making.
    expect(parts.jumps.every((j) => j.bytes < 500 * MiB)).toBe(true);
    const note = at.at(-1)!.ledger.rows.find((r) => r.kind === "context")!.note!;
    expect(note).toContain("seen before torch's first allocation at 22.00 MiB, still being made; whole at the first sample after it");
  });

  test("what is left unexplained at the end is the program's own outside-torch growth of its steps (132 MiB), rows summing to NVML", () => {
    for (const a of at) expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
    const stepGrowth = gpt2Facts.events.reduce((s, e) => s + (e.name.startsWith("step") ? e.outside_delta! : 0), 0);
    expect(stepGrowth).toBe(132 * MiB);
    expect(at.at(-1)!.ledger.rows.find((r) => r.kind === "unexplained")!.bytes).toBe(stepGrowth);
  });
});

describe("a sample whose NVML read came after a segment its reserved figure had not seen (raw cudaMalloc run)", () => {
  test("with the tick's read window bracketed, that sample is left out and the context is 610 MiB at once, with no correction", () => {
    // The first document's time is 3.8 ms before torch's first 2 MiB segment; its NVML figure
    // (612 MiB) already held it: as of the document's time, NVML − reserved is 612 MiB.
    const asOfTime = replay("rawmalloc", rawFacts.pid);
    expect(asOfTime.at[0]!.reserved).toBe(0);
    expect(asOfTime.at[0]!.ledger.nvml_used_bytes).toBe(612 * MiB);
    const { model, at } = replay("rawmalloc", rawFacts.pid, 20_000);
    const parts = model.ledger.parts(0)!;
    expect(parts.context_bytes).toBe(rawFacts.context_bytes);
    expect(parts.context_settling_bytes).toBe(0);
    expect(parts.context_growth_bytes).toBe(0);
    expect(model.ledger.parts(0)!.context_before_first_allocation).toBe(false);
    for (const a of at.slice(1)) expect(a.ledger.rows.find((r) => r.kind === "context")!.bytes).toBe(610 * MiB);
  });
});
