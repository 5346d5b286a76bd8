// Standard output without `process.stdout`: Bun builds that Node stream on first touch, which
// costs about 12 ms of start-up (measured: an empty script 8.4 ms, one that only reads
// process.stdout 21.1 ms), more than a third of what `--json --once` costs in all.
//
// Nor through `Bun.write(Bun.stdout, …)`: where stdout and stderr are one pipe (`2>&1 | jq`) and
// anything touched process.stderr (which makes that shared pipe non-blocking), a text over 64 KiB
// came out with its first 64 KiB twice once the pipe was full. Plain write(2) calls on fd 1, each
// taking what the pipe has room for, and a short wait where it has none, write every byte once.
import { writeSync } from "node:fs";

/** The longest wait between tries on a full non-blocking pipe: short against a reader's pace. */
const MAX_WAIT_MS = 16;

/** Writes all of `text`; false when the reader has gone away (EPIPE: `| head -n 3`). */
export async function writeOut(text: string): Promise<boolean> {
  const bytes = Buffer.from(text);
  let wait = 1;
  for (let off = 0; off < bytes.length; ) {
    try {
      off += writeSync(1, bytes, off, bytes.length - off);
      wait = 1;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EPIPE") return false;
      if (code !== "EAGAIN") throw e;
      await Bun.sleep(wait); // the pipe is full: the reader takes its time
      wait = Math.min(wait * 2, MAX_WAIT_MS);
    }
  }
  return true;
}
