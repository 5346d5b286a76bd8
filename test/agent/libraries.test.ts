// The library marks (agent/gpumem_agent/libraries.py) on a CPU: the real agent on the torch,
// torch.distributed and hook doubles writes a `gpumem:nccl:…` range per event of a process group's
// life (its init, each group's first collective, new_group, destroy), never one per collective,
// and the monitor's model reads them as the ledger's marks (src/profiler/ledger.ts), the program's
// own ranges left to it. Their failures and compiled regions: test_libraries.py.
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { libraryMark } from "../../src/profiler/ledger";
import { expectUnittestPasses } from "../support/unittest";
import { buildLibrary } from "../support/native";
import { documentSamples, replayLedger } from "../support/ledger-replay";

test("one mark per event, its range entered and left around the call, named in the manifest", () => {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-libraries-"));
  const agents = join(dir, "agents");
  mkdirSync(agents, { mode: 0o700 });
  const ring = join(dir, "libraries.ring");
  const env = { ...(process.env as Record<string, string>), GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_DIR: agents };
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "libraries_run.py"), ring], { env, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`libraries_run.py failed: ${p.stderr}`);
  const out = JSON.parse(p.stdout.toString().trim().split("\n").pop()!);
  expect(out.notes.libraries).toBeUndefined();
  const names = (JSON.parse(readFileSync(ring.replace(/\.ring$/, ".json"), "utf8")) as { ranges: Record<string, string> }).ranges;
  const rec = openRingRecording(ring);
  const b = newEventBatch(4096);
  const seen: string[] = [];
  let first = Infinity;
  let last = -Infinity;
  for (;;) {
    const { count } = rec.source.read(b);
    if (count === 0) break;
    for (let i = 0; i < count; i++) {
      const a = b.action[i]!;
      if (a !== ACTION.range_enter && a !== ACTION.range_exit) continue;
      const name = names[String(b.range[i]!)]!;
      if (libraryMark(name)) {
        seen.push(`${a === ACTION.range_enter ? "enter" : "exit"} ${name.slice("gpumem:".length)}`);
        first = Math.min(first, b.time_us[i]!);
        last = Math.max(last, b.time_us[i]!);
      }
    }
  }
  rec.close();
  expect(seen).toEqual([
    "enter nccl:init_process_group",
    "exit nccl:init_process_group",
    "enter nccl:first_collective:all_reduce",
    "exit nccl:first_collective:all_reduce",
    "enter nccl:new_group",
    "exit nccl:new_group",
    "enter nccl:first_collective:all_reduce",
    "exit nccl:first_collective:all_reduce",
    "enter nccl:destroy_process_group",
    "exit nccl:destroy_process_group",
  ]);
  expect(out.marks).toBe(5);
  // The program's own range is its own: not a library mark.
  expect(Object.values(names)).toContain("train_step");
  // The monitor's model takes them as the ledger's marks: fed with one NVML figure before the
  // first mark and the same after the last (the H200 compile run's first sample: nothing moved),
  // NCCL is a row with its events and its two communicators, and no byte is given to it.
  const used = documentSamples(join(import.meta.dir, "..", "fixtures", "compile-graphs.run.ndjson.gz"), 558)[0]!.used_bytes;
  const { at } = replayLedger(ring, ring.replace(/\.ring$/, ".json"), [
    { time_us: first - 1, used_bytes: used },
    { time_us: last + 1, used_bytes: used },
  ]);
  const nccl = at[1]!.ledger.rows.find((r) => r.kind === "library")!;
  expect(nccl).toEqual({ kind: "library", name: "NCCL", bytes: 0, note: "2 communicators, last destroy_process_group" });
  expect(at[1]!.ledger.rows.reduce((s, r) => s + r.bytes, 0)).toBe(used);
  rmSync(dir, { recursive: true, force: true });
});

test("failures turn the marks off in one note, the program's calls untouched; nothing marked while compiling", () => {
  expectUnittestPasses(join(import.meta.dir, "test_libraries.py"), { count: 5 });
});
