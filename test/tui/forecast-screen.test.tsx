// The Process screen's forecast (issue 41): under the step table, what the batch is now, its peak
// and the largest batch that fits the allocator's limit, then the basis in words (the fit over the
// steps' shapes, linear or quadratic in the sequence, and its error); the basis is the line that
// gives way on a short terminal. From the real agent's ring on the torch and hook doubles (steps
// of seven sequence lengths under a set_per_process_memory_fraction cap).
import { expect, test } from "bun:test";
import { render } from "ink-testing-library";
import type { ProcessModel } from "../../src/collect/live";
import { forecastAt, forecastBasis } from "../../src/profiler/forecast";
import { ProcessScreen } from "../../src/tui/screens/process";
import { inputsRing } from "../support/inputs-ring";
import { Wide } from "../support/wide";

test("under the step table: batch and peak now, the largest batch that fits the limit, and the fit it comes from", async () => {
  const { model, out } = await inputsRing(true);
  const pm: ProcessModel = { pid: 4242, model, source: "replay", socket: null, title: "python3 inputs_run.py", ended: true };
  const fc = forecastAt(forecastBasis(model)!, { total_bytes: null, outside_bytes: null });
  const lines = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={60} ascii={false} /></Wide>).lastFrame()!.split("\n");
  const at = lines.findIndex((l) => l.startsWith("Forecast: "));
  expect(at).toBeGreaterThan(0);
  expect(lines[at]).toContain(`Forecast: batch ${out.batch}x${out.seqs.at(-1)} now, peak `);
  expect(lines[at]).toContain(`fits up to batch ${fc.max_batch} at length ${Math.max(...out.seqs)} (`);
  expect(lines[at]).toContain("the allocator's limit");
  expect(lines[at + 1]).toContain("basis: the peak fitted over 9 steps of 7 input shapes, quadratic in the sequence length (error under 0.1% over them)");
  // Under the step table: its phases' rows come before it.
  expect(lines.slice(0, at).some((l) => l.startsWith("backward"))).toBe(true);
  // A short terminal lets the basis go first, then the forecast itself, before the step table's
  // lines (the heights at which each goes move with the phase legend's lines: every height is read).
  const seen = new Set<string>();
  for (let h = 16; h <= 40; h++) {
    const f = render(<Wide columns={100}><ProcessScreen pm={pm} width={100} height={h} ascii={false} /></Wide>).lastFrame()!;
    const forecast = f.includes("Forecast: ");
    const basis = f.includes("basis: ");
    const sums = f.split("\n").some((l) => /^step \d+ +sum in phase/.test(l));
    if (basis) expect(forecast).toBe(true);
    if (forecast) expect(sums).toBe(true);
    seen.add(`${forecast}/${basis}`);
  }
  expect([...seen].sort()).toEqual(["false/false", "true/false", "true/true"]);
});

test("beside the growth finding: OOM in about N steps, from the growth per step and the room the allocator's limit leaves", async () => {
  const seqs = Array(12).fill("64").join(",");
  const { model } = await inputsRing(false, ["--leak", "--fraction", "0.0005", "--seqs", seqs]);
  const pm: ProcessModel = { pid: 4242, model, source: "replay", socket: null, title: "python3 inputs_run.py --leak", ended: true };
  const b = forecastBasis(model)!;
  // The program keeps one 1 MiB activation a step: the room left at the last step's peak, in steps of it.
  const steps = Math.ceil((b.limit_bytes! - b.peak_bytes - forecastAt(b, { total_bytes: null, outside_bytes: null }).reserve_bytes) / 2 ** 20);
  expect(forecastAt(b, { total_bytes: null, outside_bytes: null }, 2 ** 20).time_to_oom!.steps).toBe(steps);
  const frame = render(<Wide columns={200}><ProcessScreen pm={pm} width={200} height={60} ascii={false} /></Wide>).lastFrame()!;
  const line = frame.split("\n").find((l) => l.includes("memory held at step boundaries grows"))!;
  expect(line).toContain(`grows by 1.00 MiB per step; OOM in about ${steps} steps (under a second)`);
});
