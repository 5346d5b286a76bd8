// The ledger of what is outside PyTorch (issue 40) from recorded runs: a ring replayed with NVML's
// per-process used bytes fed at their recorded moments. Its rows sum exactly to NVML's used at every
// sample, the private pool of a CUDA-graphs run is its own row with torch's figures, the context is
// what NVML showed beyond torch's reserved at the first sample, and unexplained is always a row.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import { findings } from "../../src/profiler";
import { libraryMark, ledgerWords } from "../../src/profiler/ledger";
import { documentSamples, replayLedger } from "../support/ledger-replay";
import compileFacts from "../fixtures/compile-graphs.facts.json";

const FX = join(ROOT, "test", "fixtures");
const sum = (rows: Array<{ bytes: number }>) => rows.reduce((s, r) => s + r.bytes, 0);

describe("the ledger of a recorded torch.compile reduce-overhead run (H200)", () => {
  const samples = documentSamples(join(FX, "compile-graphs.run.ndjson.gz"), 558);
  const { at } = replayLedger(join(FX, "compile-graphs.ring.gz"), join(FX, "compile-graphs.json"), samples);

  test("rows sum to NVML's used bytes at every sample, unexplained always among them", () => {
    expect(at.length).toBeGreaterThan(10);
    for (const a of at) {
      expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
      expect(a.ledger.rows.filter((r) => r.kind === "unexplained")).toHaveLength(1);
      expect(a.ledger.outside_pytorch_bytes).toBe(a.ledger.nvml_used_bytes - a.reserved);
    }
  });

  test("the CUDA graphs' private pool is a row of its own, with torch's reserved bytes at the end", () => {
    const last = at[at.length - 1]!.ledger;
    const pool = compileFacts.pools.find((p) => p.pool_id[0] !== 0 || p.pool_id[1] !== 0)!;
    const row = last.rows.find((r) => r.kind === "private_pool");
    expect(row).toMatchObject({ name: `private pool (${pool.pool_id[0]}, ${pool.pool_id[1]})`, bytes: pool.reserved_bytes });
    // The default pool's rows then hold the rest of torch's reserved.
    const def = last.rows.filter((r) => r.kind === "allocated" || r.kind === "reserved_unallocated");
    expect(sum(def)).toBe(compileFacts.memory_reserved - pool.reserved_bytes);
  });

  test("the context is NVML − reserved at the first sample, its growth before the first step apart from unexplained", () => {
    const first = at[0]!;
    const ctx = first.ledger.rows.find((r) => r.kind === "context")!;
    expect(ctx.bytes).toBe(samples[0]!.used_bytes - first.reserved);
    expect(first.ledger.rows.find((r) => r.kind === "unexplained")!.bytes).toBe(0);
    // The words say every part outside torch and the unexplained rest.
    expect(ledgerWords(at[at.length - 1]!.ledger)).toMatch(/^[\d.]+ [KMG]iB outside PyTorch: CUDA context [\d.]+ [KMG]iB, unexplained /);
  });
});

describe("findings of the ledger", () => {
  test("unmarked growth outside PyTorch after the first step is a jump, named by the step it came in", () => {
    const { model } = replayLedger(join(FX, "compile-graphs.ring.gz"), join(FX, "compile-graphs.json"), documentSamples(join(FX, "compile-graphs.run.ndjson.gz"), 558));
    const parts = model.ledger.parts(0)!;
    // Compiling and capturing (no mark in a ring recorded before the agent's marks): unexplained.
    expect(parts.jumps.map((j) => j.after)).toEqual(["step 0 (forward)", "step 0 (forward)", "step 1 (forward)"]);
    expect(parts.jumps.every((j) => j.bytes >= 64 * 2 ** 20)).toBe(true);
    const f = findings(model).find((x) => x.id === "outside_jump")!;
    expect(f.title).toBe("64.00 MiB appeared outside PyTorch after step 1 (forward), with no library's mark open");
    expect(f.numbers).toMatchObject({ jump_bytes: 64 * 2 ** 20, after: "step 1 (forward)", jumps: 3 });
  });

  test("a torch.compile run's warm-up growth (its first steps, under a GiB each) is told, not warned of: no mark on its Overview row", () => {
    const { model } = replayLedger(join(FX, "compile-graphs.ring.gz"), join(FX, "compile-graphs.json"), documentSamples(join(FX, "compile-graphs.run.ndjson.gz"), 558));
    expect(model.ledger.parts(0)!.jump_steps).toEqual([0, 0, 1]);
    const f = findings(model).find((x) => x.id === "outside_jump")!;
    expect(f.severity).toBe("info");
    expect(f.numbers.jumps_after_warmup).toBe(0);
    expect(f.evidence).toContain("it is told, not warned of");
  });
});

describe("library marks", () => {
  test("a gpumem: range names a library and its event; any other range is the program's", () => {
    expect(libraryMark("gpumem:nccl:first_collective:all_reduce")).toEqual({ library: "nccl", event: "first_collective:all_reduce" });
    expect(libraryMark("gpumem:cupy")).toEqual({ library: "cupy", event: "" });
    expect(libraryMark("train_step")).toBeNull();
    expect(libraryMark("gpumem:")).toBeNull();
    expect(libraryMark(null)).toBeNull();
  });
});
