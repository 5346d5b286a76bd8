// Issue 37: under `run --json` the document says which lines of the program hold live memory
// (profile.lines), its findings carry their lines, and Prometheus exports the few lines holding
// most. The real CLI and agent on this machine's CPython, torch and the hook replaced by their
// doubles (test/agent/lines_run.py: a leak of 2 MiB a step at line:keep).
import { afterAll, expect } from "bun:test";
import { join } from "node:path";
import { exposition, PROMETHEUS_LINES } from "../../src/headless/prometheus";
import { stacksTest } from "../support/native";
import { cleanLines, LINES_RUN, markedAt, TORCH_DOUBLE } from "../support/lines-run";
import { agentDir, runJson } from "../support/run-json";
import { buildLibrary } from "../support/native";

afterAll(cleanLines);

stacksTest("run --json: profile.lines names the kept tensors' line first, the growth finding its line, Prometheus the lines holding most", () => {
  const dir = agentDir();
  const r = runJson(dir, ["python3", LINES_RUN, "leak", join(dir, "..", "leak.ring"), "--steps", "12"], 5000, {
    GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"),
    GPUMEM_TUI_RING_CAPACITY: "4096",
    GPUMEM_TUI_LIBRARY: TORCH_DOUBLE,
  });
  expect([r.code, r.stderr]).toEqual([0, ""]);
  const p = r.last.processes.find((x) => x.pid === r.pid)!;
  const lines = p.pytorch!.profile!.lines!;
  const keep = `${markedAt("keep")} <module>`;
  // twelve steps, each keeping 2 MiB
  expect(lines.top[0]).toEqual({ at: keep, bytes: 24 * 2 ** 20, blocks: 12 });
  expect(lines.top.map((l) => l.at)).toContain(`${markedAt("optimizer")} <module>`);
  const growth = p.pytorch!.profile!.findings.find((f) => f.id === "growth");
  expect(growth?.lines).toEqual([{ role: "grows", at: keep, bytes: expect.any(Number), blocks: expect.any(Number) }]);
  const text = exposition(r.last);
  const series = text.split("\n").filter((l) => l.startsWith("gpumem_pytorch_line_live_bytes{"));
  expect(series.length).toBe(Math.min(PROMETHEUS_LINES, lines.top.length) + 1);
  expect(series[0]).toContain(`line="${keep}"`);
  expect(series[0]).toEndWith(` ${24 * 2 ** 20}`);
  expect(series.at(-1)).toContain('line="(unknown)"');
}, 60_000);

stacksTest("run --json on a program that lets go of what it kept after its last step (as a training function returning does): the last document's growth still names the line that kept it", () => {
  const dir = agentDir();
  const r = runJson(dir, ["python3", LINES_RUN, "leak", join(dir, "..", "leak.ring"), "--steps", "12", "--drop"], 5000, {
    GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"),
    GPUMEM_TUI_RING_CAPACITY: "4096",
    GPUMEM_TUI_LIBRARY: TORCH_DOUBLE,
  });
  expect([r.code, r.stderr]).toEqual([0, ""]);
  const profile = r.last.processes.find((x) => x.pid === r.pid)!.pytorch!.profile!;
  const keep = `${markedAt("keep")} <module>`;
  // none of the kept tensors is live in the last document
  expect(profile.lines!.top.map((l) => l.at)).not.toContain(keep);
  const growth = profile.findings.find((f) => f.id === "growth");
  expect(growth?.title).toEndWith(`allocated at lines_run.py:${markedAt("keep").split(":").at(-1)} <module>`);
  expect(growth?.lines).toEqual([{ role: "grows", at: keep, bytes: expect.any(Number), blocks: expect.any(Number) }]);
}, 60_000);

stacksTest("stacks off (GPUMEM_TUI_STACKS=0): no lines in the document, no line series", () => {
  const dir = agentDir();
  const r = runJson(dir, ["python3", LINES_RUN, "leak", join(dir, "..", "leak.ring"), "--steps", "12"], 5000, {
    GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"),
    GPUMEM_TUI_RING_CAPACITY: "4096",
    GPUMEM_TUI_STACKS: "0",
  });
  expect(r.code).toBe(0);
  const prof = r.last.processes.find((x) => x.pid === r.pid)!.pytorch!.profile!;
  expect(prof.lines ?? null).toBeNull();
  expect(prof.findings.find((f) => f.id === "growth")?.lines).toBeUndefined();
  expect(exposition(r.last)).not.toContain("gpumem_pytorch_line_live_bytes");
}, 60_000);
