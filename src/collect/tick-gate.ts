// A replay's clock held to the monitor's ticks: a replay waits for its next state on this clock,
// and the wait ends only at a tick that finds its moment come. So a replayed model (the demo,
// `replay FILE`) changes only inside a tick, as a live agent's does (its ring is read once a tick),
// and every screen drawn between two ticks draws the same moment.
import type { ReplayClock } from "../profiler";

/** Lets every promise chain that can run, run: a woken replay feeds up to its next wait. */
const settle = () => new Promise<void>((r) => setImmediate(r));

/** Replay states caught up in one tick at most (a tick after a long stall catches up over a few). */
const MAX_WAKES_PER_TICK = 10_000;

export class TickGate {
  private sleepers: { at: number; wake: () => void }[] = [];

  /** `base` tells the time (the wall, or a test's clock); its own sleep is never used. */
  constructor(private readonly base: ReplayClock) {}

  /** The clock a replay is given: the base's time, waits ended by `tick`. */
  readonly clock: ReplayClock = {
    now_us: () => this.base.now_us(),
    sleep: (us) => new Promise<void>((wake) => void this.sleepers.push({ at: this.base.now_us() + Math.max(0, us), wake })),
  };

  /** Wakes every replay whose moment has come, earliest first, each fed up to its next wait. */
  async tick(): Promise<void> {
    for (let i = 0; i < MAX_WAKES_PER_TICK; i++) {
      const now = this.base.now_us();
      this.sleepers.sort((a, b) => a.at - b.at);
      if (!this.sleepers.length || this.sleepers[0]!.at > now) return;
      this.sleepers.shift()!.wake();
      await settle();
    }
  }
}
