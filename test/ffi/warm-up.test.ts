// `--json --once` prints the sample NVML's warm-up thread took (cuda/nvml.c, GPUMEM_WARM_KEEP)
// rather than asking NVML a second time, and says when it was taken: the document's time is the
// sample's, not the moment the document was built. Once only: the next sample is a new one.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Document } from "../../src/system/schema";
import { gpuTest, onGpu } from "../support/gpu";

const DELAY_MS = 1500;

function oneShot(): { before: number; tick: number; first: Document; second: Document } {
  const agents = mkdtempSync(join(tmpdir(), "gpumem-agents-"));
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "support", "one-shot.ts"), agents, String(DELAY_MS)], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`one-shot.ts failed: ${p.stderr}`);
  return JSON.parse(p.stdout.toString());
}

describe("the warm-up's kept sample", () => {
  (onGpu ? test.skip : test)("without a driver none is kept: the document is the tick's, and says why it has no devices", () => {
    const { tick, first, second } = oneShot();
    expect(first.time_unix_ms).toBe(tick);
    expect(first.devices).toEqual([]);
    expect(first.reason).toBe("no NVIDIA driver (libnvidia-ml.so.1) on this machine");
    expect(second.reason).toBe(first.reason);
  });

  gpuTest("a one-shot prints the warm-up's sample at the time it was taken; the next sample is a new one", () => {
    const { before, tick, first, second } = oneShot();
    expect(first.reason).toBeNull();
    expect(first.devices.length).toBeGreaterThan(0);
    // Taken by the thread, long before the collector asked (it waited DELAY_MS), after the start.
    expect(first.time_unix_ms).toBeGreaterThanOrEqual(before);
    expect(first.time_unix_ms).toBeLessThan(tick);
    expect(second.time_unix_ms).toBeGreaterThanOrEqual(tick);
    expect(second.devices.map((d) => d.uuid)).toEqual(first.devices.map((d) => d.uuid));
    for (const d of first.devices) {
      expect(d.name.length).toBeGreaterThan(0);
      expect(d.memory_total_bytes).toBeGreaterThan(0);
      expect(typeof d.gpu_utilization_percent).toBe("number");
      expect(typeof d.temperature_celsius).toBe("number");
      expect(d.sm_clock_max_mhz).toBe(second.devices.find((x) => x.uuid === d.uuid)!.sm_clock_max_mhz);
    }
  }, 30_000);
});
