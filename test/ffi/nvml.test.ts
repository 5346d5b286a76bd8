// NVML through bun:ffi. On a GPU machine: the same numbers nvidia-smi prints in the same run.
// Without a driver: a clear "no driver" answer, never a crash.
import { describe, expect, test } from "bun:test";
import { Nvml, NvmlError } from "../../src/ffi/nvml";
import { gpuTest, onGpu } from "../support/gpu";

function smi(args: string[]): string[][] {
  const out = Bun.spawnSync(["nvidia-smi", ...args, "--format=csv,noheader,nounits"]).stdout.toString().trim();
  return out ? out.split("\n").map((l) => l.split(",").map((x) => x.trim())) : [];
}

const MiB = 1024 * 1024;

describe("NVML", () => {
  (onGpu ? test.skip : test)("on a machine without the driver, opening NVML says so in words", () => {
    let hasDriver = true;
    try {
      Nvml.open().close();
    } catch (e) {
      hasDriver = false;
      expect(e).toBeInstanceOf(NvmlError);
      expect((e as NvmlError).kind).toBe("no_driver");
      expect((e as Error).message).toBe("no NVIDIA driver (libnvidia-ml.so.1) on this machine");
    }
    if (hasDriver) console.log("(an NVIDIA driver is installed here: the no-driver path was not exercised)");
  });

  gpuTest("device count, names, memory and processes agree with nvidia-smi taken in the same run", async () => {
    // A process of our own on the GPU, so that the process list has something to agree on.
    const holder = Bun.spawn(["python3", "-c", "import torch,sys,time; x=torch.empty(512*2**20, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(60)"], { stdout: "pipe" });
    const reader = holder.stdout.getReader();
    await reader.read();
    try {
      const nvml = Nvml.open();
      const sys = nvml.system();
      const gpus = smi(["--query-gpu=index,name,uuid,memory.total,memory.used,pci.bus_id"]);
      expect(sys.device_count).toBe(gpus.length);
      const apps = smi(["--query-compute-apps=pid,gpu_uuid,used_memory"]);
      // Memory in use moves while the two tools read it (another test's process starting or
      // ending on the machine): NVML's reading, taken between two of nvidia-smi's, must agree with
      // one of them or lie between them.
      const samples = gpus.map(([index]) => nvml.sample(Number(index)));
      const usedAfter = new Map(smi(["--query-gpu=index,memory.used"]).map(([i, u]) => [i, Number(u)]));
      for (const [k, [index, name, uuid, total, used, bus]] of gpus.entries()) {
        const s = samples[k]!;
        expect(s.error).toBeNull();
        expect(s.name).toBe(name!);
        expect(s.uuid).toBe(uuid!);
        expect(s.pci_bus_id.toLowerCase()).toBe(bus!.toLowerCase());
        expect(Math.abs(s.fields.memory_total_bytes! / MiB - Number(total)) / Number(total)).toBeLessThan(0.01);
        const usedMiB = s.fields.memory_used_bytes! / MiB;
        const [lo, hi] = [Math.min(Number(used), usedAfter.get(index!) ?? Number(used)), Math.max(Number(used), usedAfter.get(index!) ?? Number(used))];
        expect({ used: usedMiB, smi: [lo, hi], agrees: usedMiB >= lo * 0.99 && usedMiB <= hi * 1.01 + 1 }).toMatchObject({ agrees: true });
        for (const key of ["gpu_utilization_percent", "temperature_celsius", "power_draw_milliwatts", "power_limit_milliwatts", "sm_clock_mhz", "memory_clock_max_mhz", "performance_state"]) {
          expect({ key, value: typeof s.fields[key] }).toEqual({ key, value: "number" });
        }
        const mine = apps.filter((a) => a[1] === uuid);
        for (const [pid, , mem] of mine) {
          const p = s.processes.find((x) => x.pid === Number(pid));
          expect(p).toBeDefined();
          if (p!.used_bytes !== null) expect(Math.abs(p!.used_bytes / MiB - Number(mem))).toBeLessThanOrEqual(Math.max(1, Number(mem) * 0.01));
        }
        expect(s.processes.length).toBe(mine.length);
      }
      expect(gpus.length).toBeGreaterThan(0);
      nvml.close();
    } finally {
      holder.kill();
    }
  }, 60_000);
});
