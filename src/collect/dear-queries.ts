// NVML's two dear queries on a slower clock than the rest of a sample. On an H200
// (bench/results/gpu-2026-11-29f/nvml-steady), a warm sample's calls take about 0.13 ms of CPU in
// all, but each process's SM share (nvmlDeviceGetProcessUtilization) takes 1.4-2.7 ms and the PCIe
// byte counters 0.36-0.64 ms, a device, every tick: most of what NVML costs a monitor that samples
// every second, and it grows with the GPUs. So a device's SM shares are read every
// PROCESS_UTIL_EVERY_MS and its PCIe counters every PCIE_EVERY_MS, each at the first two ticks too
// (a rate shows from the second tick as before, and a share NVML had no sample for at the first
// does not wait). Between reads a sample carries the last ones: each process's share as last read
// (null for a process it did not list: new since), and the counters with the read before them, so
// the rate shown is the one over the last interval between reads, never a guess.
import type { NvmlDeviceSample } from "../ffi/nvml";

export const PROCESS_UTIL_EVERY_MS = 3000;
export const PCIE_EVERY_MS = 5000;

const PCIE_FIELDS = ["pcie_rx_bytes_counter", "pcie_tx_bytes_counter", "pcie_counter_time_us"] as const;

interface DeviceDue {
  utilAt: number;
  /** Ticks that asked for the shares (the second asks soon after the first: NVML may have had no
   *  sample of a process at the first, and its share would then wait PROCESS_UTIL_EVERY_MS). */
  utilAsks: number;
  /** Each process's SM share as last read (pid → percent, null where NVML had no sample). */
  util: Map<number, number | null>;
  pcieAt: number;
  /** Ticks that asked for the counters (the second asks soon after the first). */
  pcieAsks: number;
  /** The two latest samples whose PCIe counters were read: the rate is from `from` to `to`. */
  pcieFrom: NvmlDeviceSample | undefined;
  pcieTo: NvmlDeviceSample | undefined;
}

export class DearQueries {
  private readonly due = new Map<number, DeviceDue>();

  /** What device `index`'s sample at `now` asks NVML for. */
  ask(index: number, now: number): { pcie: boolean; processUtil: boolean } {
    const d = this.due.get(index);
    if (!d) return { pcie: true, processUtil: true };
    return { pcie: d.pcieAsks < 2 || now - d.pcieAt >= PCIE_EVERY_MS || now < d.pcieAt, processUtil: d.utilAsks < 2 || now - d.utilAt >= PROCESS_UTIL_EVERY_MS || now < d.utilAt };
  }

  /** A sample taken as `ask` said (`asked`): the shares and counters it skipped filled from the
   *  last reads. Returns the sample its PCIe rate is measured from (undefined: no rate yet). */
  settle(s: NvmlDeviceSample, now: number, asked: { pcie: boolean; processUtil: boolean }): NvmlDeviceSample | undefined {
    let d = this.due.get(s.index);
    if (!d) {
      d = { utilAt: -Infinity, utilAsks: 0, util: new Map(), pcieAt: -Infinity, pcieAsks: 0, pcieFrom: undefined, pcieTo: undefined };
      this.due.set(s.index, d);
    }
    if (asked.processUtil) {
      d.utilAt = now;
      d.utilAsks++;
      d.util = new Map(s.processes.map((p) => [p.pid, p.sm_percent]));
    } else {
      for (const p of s.processes) p.sm_percent = d.util.get(p.pid) ?? null;
    }
    if (asked.pcie) {
      d.pcieAt = now;
      d.pcieAsks++;
    }
    if (asked.pcie && s.fields.pcie_counter_time_us != null) {
      d.pcieFrom = d.pcieTo;
      d.pcieTo = s;
      return d.pcieFrom;
    }
    // not asked, or asked and not read (a device without the counters, an error): the last rate stands
    if (d.pcieTo) for (const f of PCIE_FIELDS) s.fields[f] = d.pcieTo.fields[f] ?? null;
    return d.pcieFrom;
  }

  /** Devices no longer sampled (gone from the count) are forgotten. */
  keepOnly(count: number): void {
    for (const i of this.due.keys()) if (i >= count) this.due.delete(i);
  }
}
