// `--json --once` prints the sample NVML's warm-up thread took (cuda/nvml.c, GPUMEM_WARM_KEEP)
// rather than asking NVML a second time, and says when it was taken: the document's time is the
// sample's, not the moment the document was built. Once only: the next sample is a new one.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NvmlDeviceSample, NvmlSystem } from "../../src/ffi/nvml";
import { libraryPath } from "../../src/ffi/lib";
import type { Document } from "../../src/system/schema";
import { gpuTest, onGpu } from "../support/gpu";

const DELAY_MS = 1500;

type Early = { system: NvmlSystem; samples: NvmlDeviceSample[]; time_unix_ms: number } | null;

function oneShot(): { before: number; early: Early; tick: number; first: Document; second: Document } {
  const agents = mkdtempSync(join(tmpdir(), "gpumem-agents-"));
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "support", "one-shot.ts"), agents, String(DELAY_MS)], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`one-shot.ts failed: ${p.stderr}`);
  return JSON.parse(p.stdout.toString());
}

describe("the warm-up's kept sample", () => {
  test("libgpumem's Node-API entry: process.dlopen gives the warm-up's start, one function", () => {
    const addon = { exports: {} as Record<string, unknown> };
    process.dlopen(addon, libraryPath());
    expect(Object.keys(addon.exports)).toEqual(["warmUp"]);
    expect(typeof addon.exports.warmUp).toBe("function");
  });

  (onGpu ? test.skip : test)("without a driver none is kept: no first part, the document is the tick's, and says why it has no devices", () => {
    const { early, tick, first, second } = oneShot();
    expect(early).toBeNull();
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

  gpuTest("the first part, published before the slow calls: identity, memory and the processes of the printed sample, nothing else yet", async () => {
    // A process of our own on the GPU, so that the process list has a row to agree on.
    const holder = Bun.spawn(["python3", "-c", "import torch,time; x=torch.empty(256*2**20, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(60)"], { stdout: "pipe" });
    await holder.stdout.getReader().read();
    try {
      const { early, first } = oneShot();
      expect(early).not.toBeNull();
      expect(early!.time_unix_ms).toBe(first.time_unix_ms);
      expect(early!.system.device_count).toBe(first.devices.length);
      expect(early!.system.driver_version).toBe(first.driver_version);
      for (const d of first.devices) {
        const e = early!.samples.find((s) => s.uuid === d.uuid)!;
        expect({ name: e.name, pci: e.pci_bus_id, total: e.fields.memory_total_bytes, used: e.fields.memory_used_bytes }).toEqual({ name: d.name, pci: d.pci_bus_id, total: d.memory_total_bytes, used: d.memory_used_bytes });
        // The slow calls come after it: their fields are not in the first part, but in the document.
        expect(e.fields.gpu_utilization_percent).toBeNull();
        expect(e.fields.temperature_celsius).toBeNull();
        expect(typeof d.temperature_celsius).toBe("number");
        expect(e.processes.map((p) => p.pid).sort()).toEqual(first.processes.filter((p) => p.device === d.index).map((p) => p.pid).sort());
      }
      // The holder's row: /proc read for it (while the slow calls ran), as for any other process.
      const row = first.processes.find((p) => p.pid === holder.pid)!;
      expect(row).toBeDefined();
      expect(row.name).toBe("python3");
      expect(row.command).toContain("torch.empty");
      expect(row.used_bytes).toBeGreaterThan(256 * 2 ** 20);
      expect(row.user).not.toBeNull();
    } finally {
      holder.kill();
    }
  }, 60_000);
});
