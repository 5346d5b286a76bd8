// The agent's files against a full filesystem and other users (test_files.py, Python's unittest),
// started by `bun test` so that one command runs every test. Tests that need root (another uid, a
// tmpfs mount) are skipped by Python where the tests do not run as root: said here, not hidden.
import { expect, test } from "bun:test";
import { join } from "node:path";

test("agent: backed rings sized to their filesystem, private directories, files and hook cache (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_files.py"), "-v"], { stdout: "pipe", stderr: "pipe" });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  for (const line of log.split("\n").filter((l) => / \.\.\. skipped /.test(l))) console.log(`skipped: ${line}`);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran \d+ tests/);
  expect(log).toContain("OK");
}, 120_000);
