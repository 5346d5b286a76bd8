// The ledger fed an NVML figure older than torch's reserved beside it (issue 40, a false warning
// seen on the demo's screens: "18.00 GiB appeared outside PyTorch after step 19"). The demo gives
// its replay the recorded track's NVML sample in force, up to a second old, beside the replay's
// latest reserved; the shipped H100 recording reserves 17 GiB within one such second. Here the
// track's samples (demo/demo.nvml.ndjson) are fed as the demo's ticks feed them at worst: each
// beside the reserved the replay reached at the next sample (figuresAtSamples, the real ring).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { DEMO_RING, DEMO_TRACK, figuresAtSamples } from "../../src/collect/demo";
import { LedgerTrack } from "../../src/profiler/ledger";
import { parseTrack } from "../../src/system/recorded";

test("an NVML figure below torch's reserved (not of one moment) is no jump: the demo's first second", () => {
  const track = parseTrack(readFileSync(DEMO_TRACK, "utf8"), DEMO_TRACK);
  const figures = figuresAtSamples(DEMO_RING, track);
  const t = new LedgerTrack();
  let stale = 0;
  for (let i = 0; i + 1 < track.samples.length; i++) {
    const used = track.samples[i]!.processes.find((p) => p.pid === track.header.pid)?.used_bytes ?? null;
    const next = figures[i + 1];
    if (used === null || !next) continue;
    if (used < next.reserved_bytes) stale++;
    t.sample(track.samples[i]!.t_us, used, next.reserved_bytes, next.step ?? 0, `step ${next.step}`);
  }
  // The recording has such a sample (NVML 1.27 GiB beside 18.46 GiB reserved), and it made a jump.
  expect(stale).toBeGreaterThan(0);
  expect(t.parts().jumps).toEqual([]);
  // The context is then NVML − reserved at the first sample of one moment: under a GiB, not negative.
  const ctx = t.parts().context_bytes!;
  expect(ctx).toBeGreaterThan(0);
  expect(ctx).toBeLessThan(2 ** 30);
});
