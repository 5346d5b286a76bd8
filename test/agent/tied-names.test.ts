// The agent's names for tied and shared parameters (test_tied_names.py), run by `bun test`.
import { test } from "bun:test";
import { join } from "node:path";
import { expectUnittestPasses } from "../support/unittest";

test("agent: a tied parameter's gradient is named with the names it is tied to (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_tied_names.py"), { count: 5 });
});
