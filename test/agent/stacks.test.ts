// The Python stacks the hook captures (cuda/pystack.c in the hook double) and the agent's
// threshold: test_stacks.py, Python's own unittest on this machine's CPython.
import { expect } from "bun:test";
import { join } from "node:path";
import { buildLibrary, stacksTest } from "../support/native";

stacksTest("stacks: the calling thread's frames, GIL or not, interned once, consistent across threads; a failing read turning them off in the hook, the threshold's words (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_stacks.py"), "-v"], {
    env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") },
    stdout: "pipe",
    stderr: "pipe",
  });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran 6 tests/);
});
