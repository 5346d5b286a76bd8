// The Python stacks the hook captures (cuda/pystack.c in the hook double) and the agent's settings:
// test_stacks.py, Python's own unittest, on each CPython whose frames the walker reads (3.11, 3.12,
// 3.13 from their headers' layouts, 3.14 from its debug offsets) that this machine has; one it lacks
// skips, saying so. Among them a million allocations of mixed sizes from four lines through the
// double: the bytes per line, each sampled allocation weighted as docs/protocol.md says, within 5%.
import { test } from "bun:test";
import { join } from "node:path";
import { buildLibrary, cpython, pythonHeaders } from "../support/native";
import { expectUnittestPasses } from "../support/unittest";

for (const minor of [11, 12, 13, 14]) {
  const python = cpython(minor);
  const why = python === null ? ` (no python3.${minor} here)` : pythonHeaders(python) === null ? ` (needs python3.${minor}'s headers, Python.h)` : "";
  (why ? test.skip : test)(
    `stacks on CPython 3.${minor}: the calling thread's frames, GIL or not, interned once, the user's line kept below deep library frames; sampled bytes per line within 5% of the true bytes over 1 M allocations; on by default, the threshold and rate, the off switch, their words (python -m unittest)${why}`,
    () => {
      expectUnittestPasses(join(import.meta.dir, "test_stacks.py"), { python: python!, env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double", python!) }, count: 15 });
    },
    60_000,
  );
}
