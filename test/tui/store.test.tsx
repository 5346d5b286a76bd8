// One state, drawn: every screen draws the store's state of the last tick. The demo (a test
// recording with its NVML track, and the shipped one) plays on a test clock whose time also
// passes between ticks, as the wall's does: the Overview and the Process screen drawn then show the
// tick's numbers (the Overview's row at its NVML sample's moment, NVML and non-PyTorch alike on both), the screen is drawn once a tick however many states the replay went through, and
// a key still draws at once.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { DEMO_RECORDING, figuresAtSamples, readTrack } from "../../src/collect/demo";
import { summary } from "../../src/profiler";
import { sampleAt } from "../../src/system/recorded";
import { openRingRecording } from "../../src/collect/recording";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { formatBytes } from "../../src/tui/format";
import { demoStarter } from "../../src/tui/main";
import { steppedClock, type SteppedClock } from "../support/clock";
import { makeDemo } from "../support/demo";

const SIZE = { columns: 160, rows: 50 };
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
/** Lets Ink draw what it was asked to (a key read, a redraw): a few turns, no measured time. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

interface Playing {
  ctl: Controller;
  clock: SteppedClock;
  ui: ReturnType<typeof render>;
  frame: () => string;
  /** `ms` of the test's clock, with a tick at every `interval` of it (time passes between ticks). */
  run: (ms: number) => Promise<void>;
  done: () => void;
}

function play(ring: string, interval = 1000): Playing {
  const ctl = new Controller(null, interval);
  const clock = steppedClock();
  const demo = demoStarter(ctl, { speed: 1, ring, clock });
  demo.start();
  const ui = render(<App ctl={ctl} ascii={false} size={SIZE} />);
  let since = 0;
  return {
    ctl,
    clock,
    ui,
    frame: () => plain(ui.lastFrame()!),
    run: async (ms) => {
      for (let t = 0; t < ms; t += 50) {
        await clock.advance(50_000);
        if ((since += 50) >= interval) (since = 0), await ctl.tick();
      }
      await settle();
    },
    done: () => (demo.stop(), ui.unmount()),
  };
}

/** The recording's pid, the demo process's row on the Overview. */
function pidOf(ring: string): number {
  const rec = openRingRecording(ring);
  const pid = rec.manifest!.pid;
  rec.close();
  return pid;
}

const recordings: [string, () => string, (ring: string) => void][] = [
  ["a test recording with its NVML track", () => makeDemo(), (ring) => rmSync(dirname(ring), { recursive: true, force: true })],
  ["the shipped demo", () => DEMO_RECORDING, () => {}],
];

describe("the same state on every screen", () => {
  for (const [name, make, clean] of recordings) {
    // The Overview's row pairs NVML's sample with the allocator's figures at that sample's moment
    // (8e2c61a: beside the replay's latest, a sample up to a second old read 1.18 GiB on the GPU
    // under 18.46 GiB reserved); the Process screen shows the replay's figures at the tick. Each
    // stays the tick's while the replay's clock runs on without one.
    test(`${name}: the Overview's allocated and reserved are those at its NVML sample's moment, the Process screen's the tick's, drawn between two ticks`, async () => {
      const ring = make();
      const pid = pidOf(ring);
      const track = readTrack(ring)!;
      const atSamples = figuresAtSamples(ring, track);
      const p = play(ring);
      let atTick = null as { allocated: string; reserved: string; sample: number } | null;
      const tick = p.ctl.tick.bind(p.ctl);
      p.ctl.tick = async (now?: number) => {
        await tick(now);
        const pm = p.ctl.state.processes[0]!;
        const d = summary(pm.model).devices[0];
        const t = Math.max(...pm.model.devices.map((x) => x.lastTime_us));
        atTick = d ? { allocated: formatBytes(d.allocated_bytes), reserved: formatBytes(d.reserved_bytes), sample: sampleAt(track, t) } : null;
      };
      try {
        let compared = 0;
        for (let i = 0; i < 4; i++) {
          // A tick, then 0.4 s more of the replay's clock with no tick: the screens still show the tick's moment.
          await p.run(i === 0 ? 1000 : 1400);
          p.ui.stdin.write("1");
          await settle();
          const row = p.frame().split("\n").find((l) => l.startsWith(`${pid} `));
          const sampled = atTick ? atSamples[atTick.sample] : null;
          if (!row || !atTick || !sampled) continue;
          expect(row).toContain(` ${formatBytes(sampled.allocated_bytes)} `);
          expect(row).toContain(` ${formatBytes(sampled.reserved_bytes)} `);
          p.ui.stdin.write("2");
          await settle();
          const head = /allocated (\S+ \S+)\s+reserved (\S+ \S+)/.exec(p.frame());
          expect(head).not.toBeNull();
          expect(head![1]).toBe(atTick.allocated);
          expect(head![2]).toBe(atTick.reserved);
          compared++;
        }
        expect(compared).toBeGreaterThanOrEqual(2);
      } finally {
        p.done();
        clean(ring);
      }
    });

    test(`${name}: a number on the Overview equals the same number on the Process screen (NVML's memory of the process, and what PyTorch leaves of it)`, async () => {
      const ring = make();
      const pid = pidOf(ring);
      const p = play(ring);
      try {
        let compared = 0;
        for (let i = 0; i < 4; i++) {
          await p.run(i === 0 ? 1000 : 1400);
          const row = p.ctl.state.doc?.processes.find((q) => q.pid === pid || q.agent_pid === pid);
          if (!row || row.used_bytes === null || !row.pytorch) continue;
          p.ui.stdin.write("1");
          await settle();
          const line = p.frame().split("\n").find((l) => l.startsWith(`${pid} `));
          expect(line).toContain(formatBytes(row.used_bytes));
          p.ui.stdin.write("2");
          await settle();
          const head = /NVML (\S+(?: \S+)?)\s+non-PyTorch (\S+(?: \S+)?)/.exec(p.frame());
          expect(head).not.toBeNull();
          expect(head![1]).toBe(formatBytes(row.used_bytes));
          expect(head![2]).toBe(formatBytes(row.pytorch.non_pytorch_bytes!));
          compared++;
        }
        expect(compared).toBeGreaterThanOrEqual(2);
      } finally {
        p.done();
        clean(ring);
      }
    });
  }
});

describe("drawn once an interval, and at once after a key", () => {
  test("the demo on the Process screen: 3 s of replay at a 1-s interval is at most one drawing a tick; a key draws without a tick", async () => {
    const ring = makeDemo();
    const p = play(ring);
    try {
      await p.run(1000);
      p.ui.stdin.write("2");
      await settle();
      expect(p.frame()).toContain("[2 Process]");
      const before = p.ui.frames.length;
      const ticks = p.ctl.ticks;
      await p.run(3000);
      const ticked = p.ctl.ticks - ticks;
      expect(ticked).toBe(3);
      // The replay went through ~30 states (one each 0.1 s of the recording): each tick draws once.
      expect(p.ui.frames.length - before).toBeLessThanOrEqual(ticked);
      // A key draws at once: no tick, no time passed.
      const drawn = p.ui.frames.length;
      p.ui.stdin.write("3");
      await settle();
      expect(p.ui.frames.length).toBeGreaterThan(drawn);
      expect(p.frame()).toContain("[3 Tensors]");
    } finally {
      p.done();
      rmSync(dirname(ring), { recursive: true, force: true });
    }
  });
});

describe("the registry", () => {
  test("every screen names its own key, none twice; a screen's key does not depend on its place", async () => {
    const { SCREENS } = await import("../../src/tui/registry");
    const keys = SCREENS.map((s) => s.key);
    expect(new Set(keys).size).toBe(SCREENS.length);
    expect(keys.every((k) => /^[1-9]$/.test(k))).toBe(true);
  });
});
