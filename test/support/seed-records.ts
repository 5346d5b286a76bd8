// An attach's seed on a real recording, for the seed's tests: every record of a committed ring as
// written (frees not folded: record i is batch row i), and the seed the agent's own code makes when
// attached at one record with its snapshot at another (test/agent/attach_seed.py, on
// test/fixtures/normal-history).
import { join } from "node:path";
import { newEventBatch, type EventBatch } from "../../src/ffi/events";
import { openRing } from "../../src/ffi/ring";
import { parseSeed, type Seed } from "../../src/profiler";

const FIX = join(import.meta.dir, "..", "fixtures");

/** Every record of test/fixtures/`name`, as written. */
export function records(name: string): EventBatch {
  const r = openRing(join(FIX, name), { copy: true });
  try {
    const all = newEventBatch(1 << 20);
    const b = newEventBatch(1 << 16);
    for (;;) {
      const { count } = r.read(b);
      if (count === 0) break;
      for (const k of Object.keys(b) as (keyof EventBatch)[]) if (k !== "count") (all[k] as Float64Array).set((b[k] as Float64Array).subarray(0, count), all.count);
      all.count += count;
    }
    return all;
  } finally {
    r.close();
  }
}

/** The seed the agent would make, attached at record `attach`, its snapshot at record `at`. */
export function agentSeed(attach: number, at: number, window = 20): Seed {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "..", "agent", "attach_seed.py"), String(attach), String(at), "--before", String(window), "--after", String(window)], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return parseSeed(p.stdout.toString());
}
