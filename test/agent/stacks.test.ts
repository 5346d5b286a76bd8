// The Python stacks the hook captures (cuda/pystack.c in the hook double) and the agent's settings:
// test_stacks.py, Python's own unittest, on each CPython whose frames the walker reads (3.11, 3.12,
// 3.13 from their headers' layouts, 3.14 from its debug offsets) that this machine has; one it lacks
// skips, saying so. Among them a million allocations of mixed sizes from four lines through the
// double: the bytes per line, each sampled allocation weighted as docs/protocol.md says, within 5%.
// The walk by debug offsets (3.14's) runs on 3.13 too, which publishes its own table: built so
// (GPUMEM_PYSTACK_OFFSETS_CHECK), the same tests pass through that path where no 3.14 is at hand.
import { test } from "bun:test";
import { join } from "node:path";
import { buildLibrary, cpython, pythonHeaders } from "../support/native";
import { unittestPasses } from "../support/unittest";

const WHAT =
  "the calling thread's frames, GIL or not, interned once, the user's line kept below deep library frames; sampled bytes per line within 5% of the true bytes over 1 M allocations; on by default, the threshold and rate, the off switch, their words (python -m unittest)";

for (const [minor, defines, how] of [
  [11, [], ""],
  [12, [], ""],
  [13, [], ""],
  [13, ["GPUMEM_PYSTACK_OFFSETS_CHECK"], " read through its debug offsets, as 3.14's are"],
  [14, [], ""],
] as [number, string[], string][]) {
  const python = cpython(minor);
  const why = python === null ? ` (no python3.${minor} here)` : pythonHeaders(python) === null ? ` (needs python3.${minor}'s headers, Python.h)` : "";
  // Each interpreter's run shares nothing with the others': concurrent, on both cores.
  (why ? test.skip : test.concurrent)(
    `stacks on CPython 3.${minor}${how}: ${WHAT}${why}`,
    async () => {
      await unittestPasses(join(import.meta.dir, "test_stacks.py"), { python: python!, env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double", python!, defines) }, count: 16 });
    },
    60_000,
  );
}
