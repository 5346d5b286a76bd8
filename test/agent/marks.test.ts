// The mark-every-hook mode (GPUMEM_TUI_MARKS=hooks) on a CPU: the real agent on the torch and hook
// doubles (test/agent/marks_run.py) writes each device's SYNC and SYNC_PEAKS at every module
// forward (before and after), backward (the output's gradient arrived) and optimizer hook; off by
// default; the monitor's model reads the new record without counting it invalid; and issue 36's
// comparison (test/support/exact.ts) replays the ring and finds the model equal to the double's
// "torch" at every point. The same comparison on the GPU recordings: test/profiler/exact-rings.test.ts.
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { expectUnittestPasses } from "../support/unittest";
import { POINT_NAMES } from "../../src/ffi/wire";
import { compareAtSyncs, describeReport } from "../support/exact";
import { buildLibrary } from "../support/native";

const RUN = join(import.meta.dir, "marks_run.py");

/** marks_run.py's ring (and its JSON line), the mode asked or not. */
function record(marks: string | null, steps = 3): { ring: string; out: { records: number; sync_points: number | null; notes: Record<string, string> } } {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-marks-"));
  const agents = join(dir, "agents");
  mkdirSync(agents, { mode: 0o700 });
  const env: Record<string, string> = { ...(process.env as Record<string, string>), GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_DIR: agents };
  delete env.GPUMEM_TUI_MARKS;
  if (marks !== null) env.GPUMEM_TUI_MARKS = marks;
  const ring = join(dir, "marks.ring");
  const p = Bun.spawnSync(["python3", RUN, ring, "--steps", String(steps)], { env, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`marks_run.py failed: ${p.stderr}`);
  return { ring, out: JSON.parse(p.stdout.toString().trim().split("\n").pop()!) };
}

/** The ring's records: [action, device, extra] each. */
function records(path: string): [number, number, number][] {
  const rec = openRingRecording(path);
  const out: [number, number, number][] = [];
  const b = newEventBatch(4096);
  for (;;) {
    const { count } = rec.source.read(b);
    if (count === 0) break;
    for (let i = 0; i < count; i++) out.push([b.action[i]!, b.device[i]!, b.extra[i]!]);
  }
  rec.close();
  return out;
}

test("GPUMEM_TUI_MARKS=hooks: a SYNC then its SYNC_PEAKS at every module, backward and optimizer hook, in the order the step runs them", () => {
  const { ring, out } = record("hooks");
  expect(out.notes).toEqual({});
  const recs = records(ring);
  const points: string[] = [];
  recs.forEach(([a, dev, extra], i) => {
    if (a !== ACTION.sync_peaks) return;
    expect(recs[i - 1]![0]).toBe(ACTION.sync); // from the same reading, right after
    expect(recs[i - 1]![1]).toBe(dev);
    points.push(POINT_NAMES[extra]!);
  });
  // The double's step: the model called once, its loss's gradient, then the optimizer.
  const step = ["forward_pre", "forward", "backward_pre", "optimizer_pre", "optimizer"];
  expect(points).toEqual([...step, ...step, ...step]);
  expect(out.sync_points).toBe(15);
});

test("the mode is off by default and for any other value: no SYNC_PEAKS", () => {
  for (const v of [null, "", "steps"]) {
    const { ring, out } = record(v, 2);
    expect(out.sync_points).toBeNull();
    expect(records(ring).filter(([a]) => a === ACTION.sync_peaks)).toEqual([]);
  }
});

test("issue 36's comparison on the double's ring: every point compared, none differs, no record counted invalid", () => {
  const { ring } = record("hooks", 4);
  const r = compareAtSyncs(ring);
  expect(r.points).toBe(20);
  expect(r.compared).toBe(r.syncs);
  expect(r.invalidRecords).toBe(0);
  expect(r.differences, describeReport(r)).toBe(0);
  // The peaks and active are compared too, not only the SYNC's figures.
  const withPeaks = r.marks.filter((m) => m.point !== null);
  expect(withPeaks.every((m) => m.torch.peakAllocated !== undefined && m.model!.peakAllocated === m.torch.peakAllocated)).toBe(true);
  expect(Math.max(...withPeaks.map((m) => m.torch.peakAllocated!))).toBeGreaterThan(0);
});

test("the mode's hooks made to fail or skipped: one note and the program goes on; nothing inside a compiled region; no hook, no mode, said (test_marks.py)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_marks.py"), { env: { ...process.env, GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") }, count: 4 });
});
