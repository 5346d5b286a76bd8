// The demo's PyTorch figures at its NVML samples are read as the replay reaches them, not in a pass
// over the whole recording before the first frame (a third of `--demo`'s start): asked in any order
// they are the whole pass's, and a recording gone by the time they are asked is said once, in
// words, with no figures rather than a throw into the monitor's tick.
import { expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_DIR, DEMO_RING, figuresAsked, figuresAtSamples, readTrack, startDemo } from "../../src/collect/demo";

test("asked out of order, a sample at a time, the figures (and profiles) are the whole pass's", () => {
  const track = readTrack(DEMO_RING)!;
  for (const profiles of [false, true]) {
    const whole = figuresAtSamples(DEMO_RING, track, { profiles });
    const at = figuresAsked(DEMO_RING, track, { profiles });
    const order = [3, 0, 9, 1, 5, 9, 2, 8, 4, 7, 6];
    const asked = order.map((i) => [i, at(i)] as const);
    for (const [i, f] of asked) expect(f).toEqual(whole[i]!);
    // All but the samples taken before the program's first allocation.
    expect(whole.filter(Boolean).length).toBeGreaterThan(track.samples.length / 2);
  }
});

test("the demo starts without reading its figures: a recording removed after the start is said on its process's notes, once, and the row has no figures", async () => {
  const dir = mkdtempSync(join(tmpdir(), "demo-figures-"));
  try {
    for (const name of ["demo.ring.gz", "demo.nvml.ndjson", "demo.json", "demo.names.json"]) copyFileSync(join(DEMO_DIR, name), join(dir, name));
    const ring = join(dir, "demo.ring.gz");
    const demo = startDemo(ring, { speed: 1, onUpdate: () => {} });
    try {
      rmSync(ring);
      const told: string[] = [];
      const at = figuresAsked(ring, demo.machine!.track, { onError: (m) => told.push(m) });
      expect([at(0), at(4), at(0)]).toEqual([null, null, null]);
      expect(told).toEqual([`the recording's figures at its NVML samples could not be read: ${ring}: no such file`]);
      // The demo's own machine asks once its replay has a moment, and says so on the Process screen's notes.
      const until = Date.now() + 10_000;
      while (demo.handle.pm.model.devices.length === 0 && Date.now() < until) await Bun.sleep(10);
      const doc = demo.machine!.tick();
      for (const p of doc.processes) expect(p.pytorch).toBeNull();
      expect(demo.handle.pm.notes?.demo).toBe(told[0]);
    } finally {
      demo.handle.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a demo whose recording is gone when it would play over stays on its end and says why, raising nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "demo-figures-"));
  try {
    for (const name of ["demo.ring.gz", "demo.nvml.ndjson", "demo.json", "demo.names.json"]) copyFileSync(join(DEMO_DIR, name), join(dir, name));
    const ring = join(dir, "demo.ring.gz");
    // Its ~30 s at 500 times their pace, idle stretches cut to 2 s.
    const demo = startDemo(ring, { speed: 500, onUpdate: () => {} });
    try {
      rmSync(ring);
      const until = Date.now() + 20_000;
      while (!demo.handle.pm.notes?.replay && Date.now() < until) await Bun.sleep(20);
      expect(demo.handle.pm.notes?.replay).toBe(`not played over: ${ring}: no such file`);
      expect(demo.handle.pm.ended).toBe(true);
    } finally {
      demo.handle.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
