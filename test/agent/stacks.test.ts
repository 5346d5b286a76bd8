// The Python stacks the hook captures (cuda/pystack.c in the hook double) and the agent's
// threshold: test_stacks.py, Python's own unittest, on each CPython whose frames the walker reads
// (3.11, 3.12, 3.13) that this machine has; one it lacks skips, saying so.
import { test } from "bun:test";
import { join } from "node:path";
import { buildLibrary, cpython, pythonHeaders } from "../support/native";
import { expectUnittestPasses } from "../support/unittest";

for (const minor of [11, 12, 13]) {
  const python = cpython(minor);
  const why = python === null ? ` (no python3.${minor} here)` : pythonHeaders(python) === null ? ` (needs python3.${minor}'s headers, Python.h)` : "";
  (why ? test.skip : test)(`stacks on CPython 3.${minor}: the calling thread's frames, GIL or not, interned once, consistent across threads; a failing read turning them off in the hook, the threshold's words (python -m unittest)${why}`, () => {
    expectUnittestPasses(join(import.meta.dir, "test_stacks.py"), { python: python!, env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double", python!) }, count: 7 });
  });
}
