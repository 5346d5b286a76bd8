// Each step's input shape and the allocator's limit, from the agent to the forecast, on a CPU: the
// real agent on the torch and hook doubles (test/agent/inputs_run.py) feeds steps of seven sequence
// lengths and caps the allocator; its ring says every step's batch and sequence and the limit; the
// model keeps them, and the forecast fits the steps' peaks, linear in the sequence where the program
// holds batch x seq activations and quadratic where it also holds batch x seq x seq weights, each
// exact to the bytes the program allocated. The agent's own rules (test_inputs.py): unittest.
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { forecastAt, forecastBasis, neededAt, peakAt } from "../../src/profiler/forecast";
import { exposition } from "../../src/headless/prometheus";
import { buildLibrary } from "../support/native";
import { INPUTS_RUN, inputsRing } from "../support/inputs-ring";
import { agentDir, runJson } from "../support/run-json";
import { TORCH_PYTHON_HINT, torchPython } from "../support/torch";
import { expectUnittestPasses } from "../support/unittest";

const RUN = INPUTS_RUN;
const recorded = inputsRing;

test("the agent's rules for inputs and the limit: found, once a step, guarded, the setter passed through (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_inputs.py"), { count: 7 });
});

const torchPy = torchPython();
test.skipIf(!torchPy)(`with real torch: the outermost call by keyword once the models' own hooks take over; the setter passes torch's own error through${torchPy ? "" : ` (${TORCH_PYTHON_HINT})`}`, () => {
  expectUnittestPasses(join(import.meta.dir, "inputs_torch.py"), { count: 2, python: torchPy! });
}, 60_000);

for (const quadratic of [false, true]) {
  test(`steps of seven sequence lengths${quadratic ? " with seq x seq weights" : ""}: each step's input and the limit in the ring, the peak fitted ${quadratic ? "quadratic" : "linear"} in the sequence`, async () => {
    const { model, out } = await recorded(quadratic);
    // Every step's input, as the program fed it (the first forward of each step, step 0 on).
    expect(out.seqs.map((_, i) => model.inputs.at(i) && [model.inputs.at(i)!.batch, model.inputs.at(i)!.seq])).toEqual(out.seqs.map((s) => [out.batch, s]));
    expect(model.inputs.limits.get(0)).toBe(Math.floor(out.fraction * out.total));
    const b = forecastBasis(model)!;
    expect(b.fit).not.toBeNull();
    expect(b.fit!.in_seq).toBe(quadratic ? "quadratic" : "linear");
    // The steps after the first (warm-up), their shapes told apart; the peaks fitted within 0.1%.
    expect(b.fit!.steps).toBe(out.seqs.length - 1);
    expect(b.fit!.shapes).toBe(new Set(out.seqs.slice(1)).size);
    expect(b.fit!.max_error).toBeLessThan(0.001);
    // What each token holds: 1024 floats of activation (and 16 floats per position of the weights).
    expect(b.fit!.per_token_bytes).toBeGreaterThan(4096 * 0.99);
    expect(b.fit!.per_token_bytes).toBeLessThan(4096 * 1.01 + 4);
    if (quadratic) expect(Math.abs(b.fit!.per_token_seq_bytes - 64)).toBeLessThan(1);
    else expect(b.fit!.per_token_seq_bytes).toBe(0);
    // The room is the allocator's limit; the largest batch fits it, one more does not.
    const f = forecastAt(b, { total_bytes: null, outside_bytes: null });
    expect(f.room_bytes).toBe(b.limit_bytes!);
    expect(neededAt(b, f.max_batch!)).toBeLessThanOrEqual(f.room_bytes!);
    expect(neededAt(b, f.max_batch! + 1)).toBeGreaterThan(f.room_bytes!);
    expect(f.words).toContain(`fits up to batch ${f.max_batch} at length ${Math.max(...out.seqs)}`);
    expect(f.basis).toContain(`${quadratic ? "quadratic" : "linear"} in the sequence length`);
  });
}

test("run --json's last document carries the forecast in the allocator's limit, and Prometheus its largest batch", async () => {
  const r = runJson(agentDir(), ["python3", RUN, join(mkdtempSync(join(tmpdir(), "gpumem-inputs-")), "x.ring"), "--quadratic"], 5000, {
    GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"),
    GPUMEM_TUI_LIBRARY: join(import.meta.dir, "torch_double.py"),
  });
  expect([r.code, r.stderr]).toEqual([0, ""]);
  const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as { seqs: number[]; fraction: number; total: number };
  const fc = r.last.processes.find((x) => x.pid === r.pid)?.pytorch?.forecast;
  expect(fc).toBeTruthy();
  expect([fc!.batch, fc!.seq, fc!.fit?.in_seq, fc!.limit_bytes, fc!.room_bytes]).toEqual([4, out.seqs.at(-1)!, "quadratic", Math.floor(out.fraction * out.total), Math.floor(out.fraction * out.total)]);
  expect(fc!.words).toContain(`fits up to batch ${fc!.max_batch} at length ${Math.max(...out.seqs)}`);
  // The same figure as the model's own forecast of the ring (the replay above).
  const { model } = await recorded(true);
  expect(fc!.max_batch).toBe(forecastAt(forecastBasis(model)!, { total_bytes: null, outside_bytes: null }).max_batch);
  expect(exposition(r.last)).toMatch(new RegExp(`^gpumem_forecast_max_batch\\{[^}]*pid="${r.pid}"[^}]*\\} ${fc!.max_batch}$`, "m"));
}, 30_000);

test("the last step's outputs, held by a loop variable until the next forward returns, scale with the batch: not counted fixed", async () => {
  const { model, out } = await inputsRing(false, ["--keep-output", "--seqs", "64,64,64,64,64,64"]);
  const b = forecastBasis(model)!;
  expect(b.fit).toBeNull(); // one shape: the split at the peak
  expect(b.peak_phase).toBe("forward"); // the end of forward, with the last step's logits still held
  const logits = out.batch * 64 * 2048 * 4;
  // The last step's logits and its loss (a 4-byte tensor in a 512-byte block).
  expect(b.carried_bytes).toBe(logits + 512);
  // What stays: the weight and its momentum, 1 MiB each.
  expect(b.fixed_bytes).toBe(2 * 2 ** 20);
  expect(peakAt(b, 2 * out.batch)).toBe(b.fixed_bytes + 2 * b.scaling_bytes);
  expect(b.words).toContain("and the 2.00 MiB the last step left there and this one freed (its outputs, still held)");
});

test("run --json's last document: time to OOM beside the growth, and Prometheus's gpumem_forecast_oom_steps", () => {
  const seqs = Array(12).fill("64").join(",");
  const ring = join(mkdtempSync(join(tmpdir(), "gpumem-inputs-")), "x.ring");
  const r = runJson(agentDir(), ["python3", RUN, ring, "--leak", "--fraction", "0.0005", "--seqs", seqs], 5000, {
    GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"),
    GPUMEM_TUI_LIBRARY: join(import.meta.dir, "torch_double.py"),
  });
  expect([r.code, r.stderr]).toEqual([0, ""]);
  const p = r.last.processes.find((x) => x.pid === r.pid)!.pytorch!;
  const growth = p.profile!.findings.find((f) => f.id === "growth")!;
  const fc = p.forecast!;
  expect(fc.time_to_oom!.growth_per_step_bytes).toBe(growth.numbers.growth_per_step_bytes as number);
  expect(fc.time_to_oom!.growth_per_step_bytes).toBe(2 ** 20);
  expect(fc.time_to_oom!.steps).toBe(Math.ceil((fc.room_bytes! - fc.peak_bytes - fc.reserve_bytes) / 2 ** 20));
  expect(fc.time_to_oom!.oom_step).toBe(fc.step + fc.time_to_oom!.steps);
  expect(exposition(r.last)).toMatch(new RegExp(`^gpumem_forecast_oom_steps\\{[^}]*pid="${r.pid}"[^}]*\\} ${fc.time_to_oom!.steps}$`, "m"));
}, 30_000);
