// The demo's replay must not sit still through a recording's idle stretch (normal.ring has 4.7 s
// with no event after the model is built), and after the cut it must keep its pace, not rush.
import { expect, test } from "bun:test";
import { idleCuttingClock } from "../../src/collect/live";
import { openRingRecording } from "../../src/collect/recording";
import { replay } from "../../src/profiler/replay";
import { DEMO_RECORDING } from "../../src/tui/main";

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

test("the demo recording replays at the recorded pace (1×) with no wait over 2 s, and its steps still take their time", async () => {
  const rec = openRingRecording(DEMO_RECORDING);
  const base = manualClock();
  let states = 0;
  for await (const _ of replay(rec.source, { speed: 1, clock: idleCuttingClock(2_000_000, base), ranges: rec.ranges, state_every_us: 100_000 })) states++;
  const total = base.waits.reduce((a, b) => a + b, 0);
  expect(Math.max(...base.waits)).toBeLessThanOrEqual(2_000_000);
  // Without the cut the idle stretch alone would take 4.7 s; the rest still plays at its pace
  // (0.4 s of steps are 0.4 s on the wall), so the whole run is neither frozen nor rushed.
  expect(total).toBeLessThan(3_000_000);
  expect(total).toBeGreaterThan(2_300_000);
  expect(states).toBeGreaterThan(3);
});
