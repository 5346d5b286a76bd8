// The ledger's rows named by the agent's marks, from two runs recorded on an H200
// (test/fixtures/ledger/README.md): a torch.compile(mode="reduce-overhead") GPT-2 (Triton's
// compiles, the CUDA graphs' captures and their private pool) and FSDP2 under torchrun, one rank
// (NCCL's communicator made at init_process_group with its device: eager; destroyed at the end).
// Each ring replayed with the NVML samples of the monitor's own documents of the same run, the
// samples read as the live monitor reads them (a read window: src/collect/same-moment.ts), and held
// to the program's own figures (pynvml's used beside torch's reserved on either side of each event).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import type { LedgerRow } from "../../src/profiler/ledger";
import { documentSamples, replayLedger } from "../support/ledger-replay";
import compileFacts from "../fixtures/ledger/compile.facts.json";
import fsdpFacts from "../fixtures/ledger/fsdp2.facts.json";

const FX = join(ROOT, "test", "fixtures", "ledger");
const MiB = 2 ** 20;
const sum = (rows: Array<{ bytes: number }>) => rows.reduce((s, r) => s + r.bytes, 0);
const replay = (name: string, pid: number) => replayLedger(join(FX, `${name}.ring.gz`), join(FX, `${name}.json`), documentSamples(join(FX, `${name}.run.ndjson.gz`), pid), 0, { readWindow_us: 20_000 });
const delta = (facts: { events: Array<{ name: string; outside_delta: number }> }, name: string) => facts.events.find((e) => e.name === name)!.outside_delta;
const row = (rows: LedgerRow[], name: string) => rows.find((r) => r.name === name);

describe("torch.compile reduce-overhead GPT-2: Triton, CUDA graphs and their private pool", () => {
  const { model, at } = replay("compile", compileFacts.pid);
  const last = at.at(-1)!.ledger;

  test("every sample's rows sum to NVML's used", () => {
    expect(at.length).toBeGreaterThan(20);
    for (const a of at) expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
  });

  test("the private pool's row is the pool the program's torch saw (within 2 MiB)", () => {
    const pool = compileFacts.samples.at(-1)!.pools!.find((p) => p.pool_id[0] === 0 && p.pool_id[1] === 1)!;
    expect(pool.reserved_bytes).toBeGreaterThan(64 * MiB);
    const r = row(last.rows, "private pool (0, 1)")!;
    expect(r.kind).toBe("private_pool");
    expect(Math.abs(r.bytes - pool.reserved_bytes)).toBeLessThanOrEqual(2 * MiB);
  });

  test("Triton and CUDA graphs, named by their marks, hold what the first step added outside torch (within 2 MiB); the context is the program's own", () => {
    const triton = row(last.rows, "Triton")!;
    const graphs = row(last.rows, "CUDA graphs")!;
    expect(triton.kind).toBe("library");
    expect(graphs.kind).toBe("library");
    expect(triton.bytes).toBeGreaterThan(0);
    expect(graphs.bytes).toBeGreaterThan(0);
    expect(graphs.note).toContain("last capture_end");
    const step1 = delta(compileFacts, "step1");
    expect(step1).toBeGreaterThan(64 * MiB);
    expect(Math.abs(triton.bytes + graphs.bytes - step1)).toBeLessThanOrEqual(2 * MiB);
    const ctx = last.rows.find((r) => r.kind === "context")!;
    expect(ctx.name).toBe("CUDA context");
    expect(Math.abs(ctx.bytes - compileFacts.context_bytes)).toBeLessThanOrEqual(2 * MiB);
    // Each library's events, as many as its marks entered in the ring.
    const libs = model.ledger.parts(0)!.libraries;
    expect(libs.find((l) => l.library === "triton")!.events).toBeGreaterThan(0);
    expect(libs.find((l) => l.library === "cudagraphs")!.events).toBeGreaterThan(0);
  });
});

describe("FSDP2 under torchrun, one rank: NCCL from its init mark", () => {
  const { model, at } = replay("fsdp2", fsdpFacts.pid);
  const nccl = (a: (typeof at)[number]) => row(a.ledger.rows, "NCCL");

  test("every sample's rows sum to NVML's used", () => {
    expect(at.length).toBeGreaterThan(20);
    for (const a of at) expect(sum(a.ledger.rows)).toBe(a.ledger.nvml_used_bytes);
  });

  test("NCCL's row, once the communicator is whole, is what init_process_group added (within 2 MiB), one communicator", () => {
    const init = delta(fsdpFacts, "init_process_group");
    expect(init).toBeGreaterThan(64 * MiB);
    // The samples after the init and before the destroy: the largest the row reached.
    const most = Math.max(...at.map((a) => nccl(a)?.bytes ?? 0));
    expect(Math.abs(most - init)).toBeLessThanOrEqual(2 * MiB);
    const whole = at.find((a) => nccl(a)?.bytes === most)!;
    expect(nccl(whole)!.note).toMatch(/^1 communicator, last init_process_group/);
    const ctx = whole.ledger.rows.find((r) => r.kind === "context")!;
    expect(ctx.name).toBe("CUDA context");
    expect(Math.abs(ctx.bytes - fsdpFacts.context_bytes)).toBeLessThanOrEqual(2 * MiB);
  });

  test("after destroy_process_group the row keeps what NCCL did not give back (within 2 MiB); the steps' unmarked growth stays unexplained", () => {
    const kept = delta(fsdpFacts, "init_process_group") + delta(fsdpFacts, "destroy_process_group");
    const last = at.at(-1)!;
    expect(nccl(last)!.note).toContain("last destroy_process_group");
    expect(Math.abs(nccl(last)!.bytes - kept)).toBeLessThanOrEqual(2 * MiB);
    expect(model.ledger.parts(0)!.libraries.find((l) => l.library === "nccl")!.communicators).toBe(1);
    const steps = fsdpFacts.events.filter((e) => e.name.startsWith("step") || e.name === "model").reduce((s, e) => s + e.outside_delta, 0);
    expect(Math.abs(last.ledger.rows.find((r) => r.kind === "unexplained")!.bytes - steps)).toBeLessThanOrEqual(2 * MiB);
  });
});
