// Python stacks of large allocations, live (GPUMEM_TUI_STACKS): the walker the hook uses
// (cuda/pystack.c) reads the allocating thread's frames; the agent puts the interned stacks in its
// manifest; `run --json`'s documents name the user's line of each large tensor. The real agent,
// CLI and walker on this machine's CPython, with torch and the allocator hook replaced by their
// doubles (the double calls the walker as the hook does, on the allocating thread with the GIL).
import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gpuTest } from "../support/gpu";
import { buildLibrary, stacksTest } from "../support/native";
import { agentDir, runJson } from "../support/run-json";

const ROOT = join(import.meta.dir, "..", "..");
const SHORT_RUN = join(ROOT, "test", "agent", "short_run.py");
const DOUBLE = join(ROOT, "test", "agent", "torch_double.py");

/** The line of short_run.py whose text contains `code`. */
function lineOf(code: string): number {
  const i = readFileSync(SHORT_RUN, "utf8").split("\n").findIndex((l) => l.includes(code));
  if (i < 0) throw new Error(`short_run.py has no line with ${code}`);
  return i + 1;
}

function run(env: Record<string, string>) {
  // The double stands for torch: its file is library code, as torch's would be.
  const r = runJson(agentDir(), ["python3", SHORT_RUN], 5000, { GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_RING_CAPACITY: "4096", GPUMEM_TUI_LIBRARY: DOUBLE, ...env });
  const profile = r.last.processes.find((x) => x.pid === r.pid)?.pytorch?.profile;
  return { code: r.code, stderr: r.stderr, tensors: new Map((profile?.largest_tensors ?? []).map((t) => [t.name, t])) };
}

stacksTest("GPUMEM_TUI_STACKS=1M:0: each tensor of 1 MiB or more is named with the user's line that allocated it; smaller ones with none (no sampling)", () => {
  const r = run({ GPUMEM_TUI_STACKS: "1M:0" });
  expect([r.code, r.stderr]).toEqual([0, ""]);
  const at = (name: string) => r.tensors.get(name)?.allocated_at;
  // wte (4 MiB) and its AdamW state, made by the model's constructor and by opt.step()
  expect(at("wte.weight")).toBe(`${SHORT_RUN}:${lineOf("model = Model()")} <module>`);
  expect(at("exp_avg of wte.weight")).toBe(`${SHORT_RUN}:${lineOf("opt.step()")} <module>`);
  expect(at("exp_avg_sq of wte.weight")).toBe(`${SHORT_RUN}:${lineOf("opt.step()")} <module>`);
  // the parameters of 1 MiB, and none below the threshold
  const sized = [...r.tensors.values()].filter((t) => t.name !== null);
  expect(sized.filter((t) => t.size_bytes >= 2 ** 20).every((t) => t.allocated_at)).toBe(true);
  expect(sized.filter((t) => t.size_bytes < 2 ** 20).every((t) => !t.allocated_at)).toBe(true);
}, 30_000);

stacksTest("without GPUMEM_TUI_STACKS stacks are on: every tensor of 1 MiB or more named with its line; GPUMEM_TUI_STACKS=0 turns them off; a value that is not a size is said once and leaves them off", () => {
  const on = run({});
  expect([on.code, on.stderr]).toEqual([0, ""]);
  expect(on.tensors.get("wte.weight")?.allocated_at).toBe(`${SHORT_RUN}:${lineOf("model = Model()")} <module>`);
  // smaller ones carry a line where sampled (one per 512 KiB allocated on average): some may, not all must
  expect([...on.tensors.values()].filter((t) => t.name !== null && t.size_bytes >= 2 ** 20).every((t) => t.allocated_at)).toBe(true);
  const off = run({ GPUMEM_TUI_STACKS: "0" });
  expect(off.code).toBe(0);
  expect([...off.tensors.values()].some((t) => t.allocated_at)).toBe(false);
  const bad = run({ GPUMEM_TUI_STACKS: "lots" });
  expect(bad.code).toBe(0);
  expect(bad.stderr).toBe("gpumem-agent: GPUMEM_TUI_STACKS=lots is not a size in bytes, or a size and a sampling rate (such as 1M or 1M:512K); stacks are off\n");
  expect([...bad.tensors.values()].some((t) => t.allocated_at)).toBe(false);
}, 30_000);

// On a GPU: the hook's own capture, on the interpreter and torch there (3.12 on the device).
gpuTest("stacks as shipped (no variable set) on a transformers GPT-2 under run --json: parameters named with the model's line, AdamW state with opt.step()'s", () => {
  const script = join(ROOT, "test", "gpu", "hf_gpt2_short.py");
  const lines = readFileSync(script, "utf8").split("\n");
  const line = (code: string) => lines.findIndex((l) => l.includes(code)) + 1;
  const r = runJson(agentDir(), [process.env.PYTHON ?? "python3", script, "--steps", "14"], 1000, {});
  if (r.code !== 0) console.log(r.stdout, r.stderr);
  expect(r.code).toBe(0);
  const pt = r.last.processes.find((x) => x.pid === r.pid)?.pytorch;
  expect(pt?.notes ?? {}).not.toHaveProperty("stacks");
  const at = new Map((pt?.profile?.largest_tensors ?? []).map((t) => [t.name, t.allocated_at]));
  expect(at.get("transformer.wte.weight")).toBe(`${script}:${line("GPT2LMHeadModel(config)")} <module>`);
  expect(at.get("exp_avg of transformer.wte.weight")).toBe(`${script}:${line("opt.step()")} <module>`);
}, 300_000);
