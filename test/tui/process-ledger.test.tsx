// The Process screen's line of what is outside PyTorch (issue 40): the ledger's rows beyond torch's
// reserved in words, under the headline, from the H200 torch.compile reduce-overhead ring replayed
// with the NVML samples the monitor took of it; the first line to give way on a short terminal.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { render } from "ink-testing-library";
import type { ProcessModel } from "../../src/collect/live";
import { ProcessScreen } from "../../src/tui/screens/process";
import { documentSamples, replayLedger } from "../support/ledger-replay";
import { Wide } from "../support/wide";

const FX = join(import.meta.dir, "..", "fixtures");

function replayedWithNvml(): { pm: ProcessModel; words: string } {
  const { model, at } = replayLedger(join(FX, "compile-graphs.ring.gz"), join(FX, "compile-graphs.json"), documentSamples(join(FX, "compile-graphs.run.ndjson.gz"), 558));
  const pm: ProcessModel = { pid: 558, model, source: "replay", socket: null, title: "python3 test/gpu/compile_graphs.py", ended: true };
  const last = at[at.length - 1]!.ledger;
  const outside = last.rows.filter((r) => r.kind === "context" || r.kind === "unexplained");
  return { pm, words: `outside PyTorch: CUDA context ${(outside[0]!.bytes / 2 ** 20).toFixed(2)} MiB, unexplained ${(outside[1]!.bytes / 2 ** 20).toFixed(2)} MiB` };
}

test("under the headline: the context and unexplained, the same bytes as the document's ledger", () => {
  const { pm, words } = replayedWithNvml();
  const frame = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={50} ascii={false} /></Wide>).lastFrame()!;
  const lines = frame.split("\n");
  const at = lines.findIndex((l) => l.includes("outside PyTorch:"));
  expect(at).toBeGreaterThan(0);
  expect(lines[at]).toContain(words);
  // Right under the headline's allocated, reserved, NVML and the unallocated line.
  expect(lines.slice(0, at).some((l) => l.includes("NVML ") && l.includes("non-PyTorch"))).toBe(true);
});

test("on a short terminal it is the first line to go; at 80 columns it is cut at a word, never mid-figure", () => {
  const { pm } = replayedWithNvml();
  expect(render(<Wide columns={60}><ProcessScreen pm={pm} width={60} height={15} ascii={false} /></Wide>).lastFrame()).not.toContain("outside PyTorch:");
  const narrow = render(<ProcessScreen pm={pm} width={80} height={40} ascii={false} />).lastFrame()!;
  const line = narrow.split("\n").find((l) => l.includes("outside PyTorch"))!;
  expect(line.length).toBeLessThanOrEqual(80);
  expect(line).toMatch(/outside PyTorch: CUDA context [\d.]+ MiB/);
});

test("a context first seen late keeps the unexplained figure at 80 columns: short names, then the smallest rows folded, never the unexplained cut", async () => {
  const { outsideWords } = await import("../../src/tui/screens/outside-line");
  const LFX = join(FX, "ledger");
  const { pid } = (await import("../fixtures/ledger/attach-gpt2.facts.json")).default;
  const { at } = replayLedger(join(LFX, "attach-gpt2.ring.gz"), join(LFX, "attach-gpt2.json"), documentSamples(join(LFX, "attach-gpt2.run.ndjson.gz"), pid, { header: true }));
  const l = at[at.length - 1]!.ledger;
  const wide = outsideWords(l, 200);
  expect(wide).toContain("CUDA context and libraries loaded before the monitor saw the process");
  expect(wide).toMatch(/unexplained [\d.]+ (B|KiB|MiB)$/);
  for (const w of [80, 60, 40]) {
    const line = outsideWords(l, w);
    expect(line.length).toBeLessThanOrEqual(w);
    expect(line).toMatch(/unexplained [\d.]+ (B|KiB|MiB)$/);
  }
  expect(outsideWords(l, 80)).toContain("context+earlier");
  // Many libraries: the smallest give way as "N more" with their bytes, the unexplained stays.
  const many = { ...l, rows: [...l.rows.filter((r) => r.kind !== "unexplained"), ...["NCCL", "Triton", "CUDA graphs", "cuBLAS"].map((name, i) => ({ kind: "library" as const, name, bytes: (4 - i) * 2 ** 28, note: null })), l.rows.find((r) => r.kind === "unexplained")!] };
  const folded = outsideWords(many, 80);
  expect(folded.length).toBeLessThanOrEqual(80);
  expect(folded).toMatch(/\d more [\d.]+ [KMG]iB, unexplained /);
});
