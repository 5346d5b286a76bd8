// What nvtop and htop users read beside GPU memory: a process's CPU %, resident host memory and run
// time, from /proc (made-up trees for the edge cases, this test's own process for the real thing),
// and the document rows that carry them.
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseRss, parseStatTimes, processInfo } from "../../src/collect/procfs";
import { buildDocument } from "../../src/system/document";
import { DocumentSchema } from "../../src/system/schema";
import { cpuPercent } from "../../src/system/process";

// A stat line whose command holds spaces and a ')' (fields are counted from the last one).
const STAT = "7301 (python3 (x) y) S 1 7301 7301 0 -1 4194560 5000 0 0 0 1234 166 0 0 20 0 12 0 4200 9000000 2000 18446744073709551615";

describe("host figures from /proc", () => {
  test("stat: CPU seconds are utime + stime, start time in seconds after boot; RSS from VmRSS", () => {
    expect(parseStatTimes(STAT)).toEqual({ cpu_seconds: 14, start_seconds: 42 });
    expect(parseStatTimes("garbage")).toBeNull();
    expect(parseStatTimes("1 (x) S 1")).toBeNull();
    expect(parseRss("Name:\tpython3\nVmRSS:\t  204800 kB\n")).toBe(204800 * 1024);
    expect(parseRss("Name:\tkworker/0:1\n")).toBeNull(); // kernel threads have none
  });

  test("a /proc tree: run time is uptime minus the start time; a missing process is null, never 0", () => {
    const root = mkdtempSync(join(tmpdir(), "gpumem-proc-"));
    mkdirSync(join(root, "7301"));
    writeFileSync(join(root, "7301", "stat"), STAT);
    writeFileSync(join(root, "7301", "status"), "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nVmRSS:\t1024 kB\n");
    writeFileSync(join(root, "uptime"), "142.50 500.00\n");
    const info = processInfo(7301, root);
    expect(info.cpu_seconds).toBe(14);
    expect(info.host_memory_bytes).toBe(1024 * 1024);
    expect(info.run_time_seconds).toBeCloseTo(100.5, 6);
    const gone = processInfo(7302, root);
    expect([gone.cpu_seconds, gone.host_memory_bytes, gone.run_time_seconds]).toEqual([null, null, null]);
  });

  test("the document's measurements are rounded: run time to the millisecond, PCIe rates to whole bytes per second", () => {
    const root = mkdtempSync(join(tmpdir(), "gpumem-proc-"));
    mkdirSync(join(root, "7301"));
    writeFileSync(join(root, "7301", "stat"), STAT);
    writeFileSync(join(root, "7301", "status"), "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nVmRSS:\t1024 kB\n");
    writeFileSync(join(root, "uptime"), "64.57 500.00\n"); // 64.57 − 42 is 22.569999999999993 in floating point
    const info = processInfo(7301, root);
    const sample = { index: 0, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-1", pci_bus_id: "00000000:19:00.0", fields: { pcie_rx_bytes_counter: 1000, pcie_counter_time_us: 3e6 }, process_api: 3, error: null,
      processes: [{ pid: 7301, kind: "compute" as const, used_bytes: 2 ** 30, sm_percent: 87 }] };
    const rateFrom = new Map([[0, { ...sample, fields: { pcie_rx_bytes_counter: 0, pcie_counter_time_us: 0 } }]]);
    const doc = buildDocument({ time_unix_ms: 0, host: "h", system: null, reason: null, samples: [sample], rateFrom, processInfo: new Map([[7301, info]]), agents: [], warnings: [] });
    const text = JSON.stringify(DocumentSchema.parse(doc));
    expect(doc.processes[0]!.run_time_seconds).toBe(22.57);
    expect(doc.devices[0]!.pcie_rx_bytes_per_second).toBe(333);
    expect(text).toContain('"run_time_seconds":22.57,');
    expect(text).not.toMatch(/\d\.\d{4,}/); // no floating point tails anywhere in the document
  });

  test("CPU %: time used over time passed, of one core; null on a first sample or a reused pid", () => {
    expect(cpuPercent(10, 1000, 12, 3000)).toBe(100);
    expect(cpuPercent(10, 1000, 10.5, 2000)).toBe(50);
    expect(cpuPercent(10, 1000, 16, 3000)).toBe(300); // three cores' worth
    expect(cpuPercent(null, null, 12, 3000)).toBeNull();
    expect(cpuPercent(10, 1000, 2, 3000)).toBeNull(); // the counter went back: another process
    expect(cpuPercent(10, 3000, 12, 3000)).toBeNull();
  });

  test("this process, as the monitor reads it: resident memory and run time are real numbers", () => {
    const info = processInfo(process.pid);
    expect(info.host_memory_bytes!).toBeGreaterThan(1 << 20);
    expect(info.run_time_seconds!).toBeGreaterThanOrEqual(0);
    expect(info.run_time_seconds!).toBeLessThan(3600);
    expect(info.cpu_seconds!).toBeGreaterThan(0);
  });

  test("the document: each row carries the process's SM share from NVML and its /proc figures, null where unknown", () => {
    const sample = { index: 0, name: "NVIDIA H100 80GB HBM3", uuid: "GPU-1", pci_bus_id: "00000000:19:00.0", fields: {}, process_api: 3, error: null,
      processes: [{ pid: 7301, kind: "compute" as const, used_bytes: 2 * 2 ** 30, sm_percent: 87 }, { pid: 7302, kind: "compute" as const, used_bytes: 2 ** 30, sm_percent: null }] };
    const info = new Map([[7301, { user: "alice", name: "python3", command: "python3 train.py", uid: 1000, cpu_percent: 101.5, host_memory_bytes: 3 * 2 ** 30, run_time_seconds: 3725 }]]);
    const d = DocumentSchema.parse(buildDocument({ time_unix_ms: 0, host: "h", system: null, reason: null, samples: [sample], rateFrom: new Map(), processInfo: info, agents: [], warnings: [] }));
    expect(d.processes.map((p) => [p.pid, p.gpu_sm_percent, p.cpu_percent, p.host_memory_bytes, p.run_time_seconds])).toEqual([
      [7301, 87, 101.5, 3 * 2 ** 30, 3725],
      [7302, null, null, null, null],
    ]);
  });
});
