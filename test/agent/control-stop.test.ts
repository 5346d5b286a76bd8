// The control server's stop gives back its selector's epoll descriptor (an attach/detach cycle
// leaked one each): Python's unittest, started by `bun test`.
import { expect, test } from "bun:test";
import { join } from "node:path";

test("agent: the control server leaves no descriptor behind after stop, whichever thread stops it (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_control_stop.py"), "-v"], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran 3 tests/);
  expect(log).toContain("OK");
}, 60_000);
