// Per-process figures nvtop and nvitop users read: a busy PyTorch process's share of SM time from
// NVML (nvmlDeviceGetProcessUtilization, checked against `nvidia-smi pmon` in the same run), and
// its CPU %, resident host memory and run time from /proc, in the document's row. GPU only.
import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Nvml } from "../../src/ffi/nvml";
import { Machine } from "../../src/collect/machine";
import { gpuTest } from "../support/gpu";

const PY = process.env.PYTHON ?? (Bun.which("python3") ? "python3" : "/opt/torch/.venv/bin/python3");
// Matrix products back to back on GPU 0 for 40 s: SM busy, one CPU core busy launching them.
const BUSY = "import torch,time; a=torch.randn(4096,4096,device='cuda'); print('ready',flush=True); t=time.time()\nwhile time.time()-t<40: a=(a@a).clamp_(-1,1)";

/** `nvidia-smi pmon -c 1 -s u` lines: [gpu, pid, type, sm, mem, enc, dec, …]; "-" where unknown. */
function pmon(): string[][] {
  const r = Bun.spawnSync(["timeout", "15", "nvidia-smi", "pmon", "-c", "1", "-s", "u"], { stdout: "pipe" });
  return r.stdout.toString().split("\n").filter((l) => l.trim() && !l.startsWith("#")).map((l) => l.trim().split(/\s+/));
}

describe("per-process figures", () => {
  test("without a GPU the document's rows carry null, and the library still loads (no NVML needed)", () => {
    const c = new Machine({ agentDir: mkdtempSync(join(tmpdir(), "gpumem-agents-")) });
    const d = c.sample(Date.now());
    for (const p of d.processes) expect(p.gpu_sm_percent === null || (p.gpu_sm_percent >= 0 && p.gpu_sm_percent <= 100)).toBe(true);
    c.close();
  });

  gpuTest("a busy process: its SM % from NVML agrees with nvidia-smi pmon; CPU %, host memory and run time in its row", async () => {
    // The python process itself (not a `timeout` wrapper): NVML and pmon list the pid that holds the context.
    const busy = Bun.spawn([PY, "-c", BUSY], { stdout: "pipe", env: { ...process.env, CUDA_VISIBLE_DEVICES: "0" } });
    const reader = busy.stdout.getReader();
    await reader.read();
    try {
      const nvml = Nvml.open();
      // NVML answers for the period since the last call: the first call may see none.
      let sm: number | null = null;
      for (let i = 0; i < 10 && sm === null; i++) {
        await Bun.sleep(1000);
        sm = nvml.sample(0).processes.find((p) => p.pid === busy.pid)?.sm_percent ?? null;
      }
      const row = pmon().find((r) => Number(r[1]) === busy.pid);
      console.log(`NVML sm_percent ${sm}; nvidia-smi pmon: ${row?.join(" ") ?? "(no row)"}`);
      if (row && row[3] === "-") {
        expect(sm).toBeNull(); // the GPU does not report it: "–", never a made-up 0
      } else {
        expect(sm).not.toBeNull();
        expect(sm!).toBeGreaterThan(50);
        if (row) expect(Math.abs(sm! - Number(row[3]))).toBeLessThanOrEqual(30);
      }
      nvml.close();
      // The document, twice a second apart: CPU % needs two samples.
      const c = new Machine({ agentDir: mkdtempSync(join(tmpdir(), "gpumem-agents-")) });
      c.sample(Date.now());
      await Bun.sleep(1000);
      const d = c.sample(Date.now());
      const p = d.processes.find((x) => x.pid === busy.pid && x.device === 0)!;
      console.log(JSON.stringify({ gpu_sm_percent: p.gpu_sm_percent, cpu_percent: p.cpu_percent, host_memory_bytes: p.host_memory_bytes, run_time_seconds: p.run_time_seconds }));
      expect(p.cpu_percent!).toBeGreaterThan(30);
      expect(p.host_memory_bytes!).toBeGreaterThan(100 * 2 ** 20);
      expect(p.run_time_seconds!).toBeGreaterThan(1);
      expect(p.run_time_seconds!).toBeLessThan(120);
      c.close();
    } finally {
      busy.kill();
    }
  }, 90_000);
});
