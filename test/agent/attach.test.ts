// gpumem_agent.attach_running on a CPU (python3 -m unittest, test/agent/test_attach.py): the
// token's checks, the result file, the seed's split, and a whole attach → seed → names → detach →
// attach again inside a running program, on the torch and hook doubles.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { buildLibrary } from "../support/native";

test("agent: attach_running, its refusals, the seed, detach and attach again (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_attach.py"), "-v"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") },
  });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran \d+ tests/);
  expect(log).toContain("OK");
}, 120_000);
