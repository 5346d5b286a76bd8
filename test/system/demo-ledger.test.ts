// The demo's recorded machine with its ledgers (issue 40): `--json --once --demo` (demoDocument) has
// the recorded process's pytorch.ledger, made from the track's NVML samples each beside the
// replay's figures at that sample's own moment, and the GPU's devices[].ledger. Read as a user
// reads them: the rows sum to NVML's used (the GPU's: to its total), the context is what the first
// sample left beyond torch's reserved (under a GiB, not negative), and no jump is made of the first
// second (NVML 1.27 GiB then 19.18 GiB while the allocator reserved 17 GiB between them).
import { expect, test } from "bun:test";
import { demoDocument } from "../../src/headless/demo";
import { DEMO_RING } from "../../src/collect/demo";
import { ledgerWords } from "../../src/system/ledger-rows";
import { exposition } from "../../src/headless/prometheus";

test("--json --once --demo and serve --demo: the recorded process's ledger sums to its NVML used, the GPU's to its total; no false jump", () => {
  const doc = demoDocument(DEMO_RING);
  const p = doc.processes.find((q) => q.pytorch)!;
  const l = p.pytorch!.ledger!;
  expect(l.nvml_used_bytes).toBe(p.used_bytes!);
  expect(l.rows.reduce((s, r) => s + r.bytes, 0)).toBe(p.used_bytes!);
  expect(l.outside_pytorch_bytes).toBe(p.pytorch!.non_pytorch_bytes!);
  const ctx = l.rows.find((r) => r.kind === "context")!;
  expect(ctx.bytes).toBeGreaterThan(0);
  expect(ctx.bytes).toBeLessThan(2 ** 30);
  // What grew after the first steps stays unexplained, never more than what is outside PyTorch.
  for (const j of l.jumps) expect(Math.abs(j.bytes)).toBeLessThanOrEqual(l.outside_pytorch_bytes);
  expect(ledgerWords(l)).toMatch(/^742\.00 MiB outside PyTorch: CUDA context [\d.]+ MiB, unexplained [\d.]+ MiB$/);
  const d = doc.devices[0]!;
  expect(d.ledger!.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
  expect(d.ledger!.rows.find((r) => r.kind === "processes")!.pids).toEqual([p.pid]);
  expect(d.ledger!.words).toEqual([]);
  // serve --demo: the same rows as Prometheus series, summing alike.
  const prom = exposition(doc).split("\n");
  const series = (name: string) => prom.filter((x) => x.startsWith(`${name}{`)).map((x) => Number(x.split(" ").at(-1)));
  expect(series("gpumem_ledger_bytes").reduce((a, b) => a + b, 0)).toBe(p.used_bytes!);
  expect(series("gpumem_gpu_ledger_bytes").reduce((a, b) => a + b, 0)).toBe(d.memory_total_bytes!);
});
