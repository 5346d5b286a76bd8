// An attach's seed file (docs/protocol.md, "The seed"), read one way for a live agent (live.ts)
// and for a replay of its recording (recording.ts): bounded, checked, one line for anything wrong.
import { MAX_SEED_BYTES, parseSeed, type Seed } from "../profiler";
import { readSmallText } from "../snapshot/input-file";

/** The seed's file at `path`: a larger one than MAX_SEED_BYTES, or one that is not a seed, throws
 *  one line naming the file and the cause. */
export function readSeedFile(path: string): Seed {
  return parseSeed(readSmallText(path, "seed", MAX_SEED_BYTES), path);
}

/** Where a recording's seed lies: NAME.seed.json beside NAME.ring or NAME.ring.gz, as the agent
 *  keeps its own (`<pid>.ring`, `<pid>.seed.json`) and test/gpu/exact_attach.py copies them.
 *  Null for a name that is not a ring's. */
export function seedBeside(ring: string): string | null {
  const name = ring.replace(/\.gz$/, "");
  return name.endsWith(".ring") ? name.replace(/\.ring$/, ".seed.json") : null;
}
