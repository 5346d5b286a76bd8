// A replay clock for tests: time moves only when the test says so, and each sleeper wakes at its
// moment, in order, so a test reads what a replay did by a given recorded time without a wall clock.
import type { ReplayClock } from "../../src/profiler";

/** Lets every promise chain that can run, run (a sleeper woken, its replay's next state taken). */
const settle = () => new Promise<void>((r) => setImmediate(r));

export interface SteppedClock extends ReplayClock {
  /** Moves the time on by `us`, waking the sleepers whose moment it passes, earliest first. */
  advance(us: number): Promise<void>;
  /** Sleepers not yet woken. */
  readonly waiting: number;
}

export function steppedClock(): SteppedClock {
  let t = 0;
  const sleepers: { at: number; wake: () => void }[] = [];
  return {
    now_us: () => t,
    sleep: (us) => new Promise<void>((wake) => void sleepers.push({ at: t + Math.max(0, us), wake })),
    async advance(us) {
      const end = t + us;
      for (;;) {
        await settle();
        sleepers.sort((a, b) => a.at - b.at);
        if (!sleepers.length || sleepers[0]!.at > end) break;
        const next = sleepers.shift()!;
        t = Math.max(t, next.at);
        next.wake();
      }
      t = end;
      await settle();
    },
    get waiting() {
      return sleepers.length;
    },
  };
}

/** Waits (a bounded number of short turns, not a measured time) until `cond` holds. */
export async function until(cond: () => boolean, turns = 200): Promise<void> {
  for (let i = 0; i < turns && !cond(); i++) await Bun.sleep(10);
  if (!cond()) throw new Error(`never true: ${cond}`);
}
