// NVML's dear queries on their own clock (src/collect/dear-queries.ts) with a real driver (`bun run
// test:gpu`): the machine's samples a second apart, beside a process that computes now and then, as
// `--json` prints them: the PCIe rate from the second document, the same until the counters are read
// again; the process's SM share from the second at the latest, carried between reads.
import { describe, expect } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Machine } from "../../src/collect/machine";
import { PCIE_EVERY_MS, PROCESS_UTIL_EVERY_MS } from "../../src/collect/dear-queries";
import { gpuTest } from "../support/gpu";
import { torchPython } from "../support/torch";

const COMPUTE = `
import time, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
end = time.time() + 60
while time.time() < end:
    a @ a; torch.cuda.synchronize(); time.sleep(0.05)
`;

describe("NVML's dear queries with a real driver", () => {
  gpuTest(
    "a second apart: the PCIe rate and each process's SM share carried between their reads",
    async () => {
      const python = torchPython();
      if (!python) throw new Error("no Python with torch here");
      const proc = Bun.spawn([python, "-c", COMPUTE], { stdout: "pipe", stderr: "inherit" });
      try {
        const reader = proc.stdout.getReader();
        const first = await reader.read();
        expect(new TextDecoder().decode(first.value)).toContain("ready");
        await Bun.sleep(1000);
        const machine = new Machine({ agentDir: mkdtempSync(join(tmpdir(), "gpumem-dear-")) });
        const docs = [];
        const cost: number[] = [];
        const t0 = Date.now();
        for (let k = 0; k <= 7; k++) {
          await Bun.sleep(Math.max(0, t0 + k * 1000 - Date.now()));
          const c0 = process.cpuUsage();
          docs.push(machine.sample(t0 + k * 1000));
          const c = process.cpuUsage(c0);
          cost.push((c.user + c.system) / 1000);
        }
        machine.close();
        const dev = docs.map((d) => d.devices[0]!);
        const ours = docs.map((d) => d.processes.find((p) => p.pid === proc.pid));
        expect(ours.every((p) => p !== undefined)).toBe(true);
        // the rate: from the second document (the counters read at the first two), then the same
        // until PCIE_EVERY_MS after the second read
        expect(dev[0]!.pcie_rx_bytes_per_second).toBeNull();
        expect(dev[1]!.pcie_rx_bytes_per_second).not.toBeNull();
        const again = 1 + PCIE_EVERY_MS / 1000;
        for (let k = 2; k < again; k++) expect(dev[k]!.pcie_rx_bytes_per_second).toBe(dev[1]!.pcie_rx_bytes_per_second);
        // the share: read at the first two ticks and every PROCESS_UTIL_EVERY_MS after the second
        const shares = ours.map((p) => p!.gpu_sm_percent);
        expect(shares[1]).not.toBeNull();
        const next = 1 + PROCESS_UTIL_EVERY_MS / 1000;
        for (let k = 2; k < next; k++) expect(shares[k]).toBe(shares[1]);
        // the process's CPU a sample, for the report (its engine's compiles fall in some): the
        // ticks that asked both are 0 and 1, the dear share alone 4, the counters alone 6
        console.log(`CPU a sample (ms): ${cost.map((c) => c.toFixed(2)).join(" ")}`);
      } finally {
        proc.kill();
        await proc.exited;
      }
    },
    60_000,
  );
});
