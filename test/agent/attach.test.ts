// gpumem_agent.attach_running on a CPU (python3 -m unittest, test/agent/test_attach.py): the
// token's checks, the result file, the seed's split, and a whole attach → seed → names → detach →
// attach again inside a running program, on the torch and hook doubles.
import { test } from "bun:test";
import { join } from "node:path";
import { buildLibrary } from "../support/native";
import { expectUnittestPasses } from "../support/unittest";

test("agent: attach_running, its refusals, the seed, detach and attach again (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_attach.py"), { env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") } });
}, 120_000);
