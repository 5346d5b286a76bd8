// The agent never raises into the program it watches: its guard, the phase hooks, the wrapped
// backward, the names walk, the control thread, each made to fail (test_guard.py, Python's own
// unittest, standard library only; torch.compile's warning about global hooks on the torch double). With real torch and real tensors on a GPU: gpu.test.ts.
import { expect, test } from "bun:test";
import { join } from "node:path";

test("agent: a failing callback is caught, said once in the notes and turns its feature off; torch's own errors pass untouched (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_guard.py"), "-v"], { stdout: "pipe", stderr: "pipe" });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran 16 tests/);
  expect(log).toContain("OK");
});
