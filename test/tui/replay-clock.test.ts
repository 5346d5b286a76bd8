// The demo's replay must not sit still through a recording's idle stretch (normal.ring has 4.7 s
// with no event after the model is built), and after the cut it must keep its pace, not rush; the
// shipped demo plays at the pace it was recorded.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { idleCuttingClock, PausableClock, startReplay } from "../../src/collect/playback";
import { openRingRecording } from "../../src/collect/recording";
import { replay } from "../../src/profiler/replay";
import { DEMO_RECORDING } from "../../src/collect/demo";
import { steppedClock } from "../support/clock";

/** A clock whose time moves only when slept on: what the replay waited for, exactly. */
function manualClock() {
  const c = { t: 0, waits: [] as number[], now_us: () => c.t, sleep: async (us: number) => void (c.waits.push(us), (c.t += us)) };
  return c;
}

test("a wait longer than the cap is cut to it; the clock reads on as if it had been waited", async () => {
  const base = manualClock();
  const clock = idleCuttingClock(1_000_000, base);
  await clock.sleep(4_700_000);
  expect(base.waits).toEqual([1_000_000]);
  expect(clock.now_us()).toBe(4_700_000);
  await clock.sleep(100_000);
  expect(base.waits).toEqual([1_000_000, 100_000]);
});

/** Replays `path` at 1× with idle stretches cut to 2 s on a manual clock: what it waited, and how many states it gave. */
async function played(path: string) {
  const rec = openRingRecording(path);
  const base = manualClock();
  let states = 0;
  for await (const _ of replay(rec.source, { speed: 1, clock: idleCuttingClock(2_000_000, base), ranges: rec.ranges, state_every_us: 100_000 })) states++;
  rec.close();
  return { waits: base.waits, total: base.waits.reduce((a, b) => a + b, 0), states };
}

test("a recording with an idle stretch replays at its pace (1×) with no wait over 2 s, and its steps still take their time", async () => {
  const { waits, total, states } = await played(join(import.meta.dir, "..", "fixtures", "normal.ring"));
  expect(Math.max(...waits)).toBeLessThanOrEqual(2_000_000);
  // Without the cut the idle stretch alone would take 4.7 s; the rest still plays at its pace
  // (0.4 s of steps are 0.4 s on the wall), so the whole run is neither frozen nor rushed.
  expect(total).toBeLessThan(3_000_000);
  expect(total).toBeGreaterThan(2_300_000);
  expect(states).toBeGreaterThan(3);
});

test("the shipped demo replays at the recorded pace (1×): its 6.4 s of recording (69 steps) take 6.4 s, nothing cut", async () => {
  const { waits, total, states } = await played(DEMO_RECORDING);
  // The recording has no idle stretch (it starts as the first step does): every wait is a state's.
  expect(Math.max(...waits)).toBeLessThanOrEqual(100_000);
  expect(total).toBeGreaterThan(6_300_000);
  expect(total).toBeLessThan(6_500_000);
  expect(states).toBeGreaterThan(60);
});

test("a paused clock stands still and resumes where it stopped", async () => {
  const base = manualClock();
  const clock = new PausableClock(base);
  await clock.sleep(1_000);
  clock.pause(true);
  await base.sleep(5_000_000); // five seconds pass on the wall while paused
  expect(clock.now_us()).toBe(1_000);
  let resumed = false;
  const waiting = clock.untilRunning().then(() => (resumed = true));
  await new Promise((r) => setImmediate(r));
  expect(resumed).toBe(false);
  clock.pause(false);
  await waiting;
  expect(clock.now_us()).toBe(1_000);
  await clock.sleep(500);
  expect(clock.now_us()).toBe(1_500);
});

test("a paused replay reads no event into its model until resumed, and resumes where it stopped", async () => {
  const rec = openRingRecording(DEMO_RECORDING);
  const seen = () => r.pm.model.devices[0]?.lastTime_us ?? 0;
  const clock = steppedClock();
  const r = startReplay(rec, { speed: 20, onUpdate: () => {}, maxIdleMs: 50, clock });
  try {
    for (let i = 0; i < 100 && seen() === 0; i++) await clock.advance(20_000);
    r.pause(true);
    await clock.advance(150_000); // a state already on its way lands
    const at = seen();
    expect(at).toBeGreaterThan(0);
    await clock.advance(600_000); // at 20× that is 12 s of the recording
    expect(seen()).toBe(at);
    r.pause(false);
    for (let i = 0; i < 100 && seen() === at; i++) await clock.advance(20_000);
    expect(seen()).toBeGreaterThan(at);
    // Resumed where it stopped: not 12 s of recording at once, but at its pace.
    expect(seen() - at).toBeLessThan(5_000_000);
  } finally {
    r.stop();
  }
});
