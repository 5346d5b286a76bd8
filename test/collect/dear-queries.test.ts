// NVML's dear queries on their own clock (src/collect/dear-queries.ts): what each tick asks for, and
// what a tick that did not ask shows (the last shares, the last rate), through the document's own
// rate (buildDocument), as the screens and --json read it.
import { describe, expect, test } from "bun:test";
import { DearQueries, PCIE_EVERY_MS, PROCESS_UTIL_EVERY_MS } from "../../src/collect/dear-queries";
import type { NvmlDeviceSample } from "../../src/ffi/nvml";
import { buildDocument } from "../../src/system/document";

/** A device's sample as NVML would give it at `t` ms: rx counting 1 MB a second from 0, the SM
 *  shares given (null where not read). */
function sample(t: number, asked: { pcie: boolean; processUtil: boolean }, shares: Record<number, number | null>, opts: { counters?: boolean } = {}): NvmlDeviceSample {
  const counters = asked.pcie && opts.counters !== false;
  return {
    index: 0,
    name: "NVIDIA H200",
    uuid: "GPU-0",
    pci_bus_id: "00000000:19:00.0",
    fields: {
      pcie_rx_bytes_counter: counters ? t * 1000 : null,
      pcie_tx_bytes_counter: counters ? t * 10 : null,
      pcie_counter_time_us: counters ? t * 1000 : null,
    },
    processes: Object.entries(shares).map(([pid, sm]) => ({ pid: Number(pid), kind: "compute" as const, used_bytes: 2 ** 30, sm_percent: asked.processUtil ? sm : null })),
    process_api: 3,
    error: null,
  };
}

/** One tick at `t`: asked, sampled, settled, and the document's device and processes. */
function tick(q: DearQueries, t: number, shares: Record<number, number | null>, opts: { counters?: boolean } = {}) {
  const asked = q.ask(0, t);
  const s = sample(t, asked, shares, opts);
  const from = q.settle(s, t, asked);
  const doc = buildDocument({ time_unix_ms: t, host: "h", system: null, reason: null, samples: [s], rateFrom: from ? new Map([[0, from]]) : new Map(), processInfo: new Map(), agents: [], warnings: [] });
  return { asked, rx: doc.devices[0]!.pcie_rx_bytes_per_second, tx: doc.devices[0]!.pcie_tx_bytes_per_second, sm: Object.fromEntries(doc.processes.map((p) => [p.pid, p.gpu_sm_percent])) };
}

describe("NVML's dear queries are read every few seconds, and a tick between shows the last ones", () => {
  test("the first two ticks read both (a rate from the second), then the shares every PROCESS_UTIL_EVERY_MS", () => {
    const q = new DearQueries();
    const t0 = 1_000_000;
    const first = tick(q, t0, { 7: 40 });
    expect(first.asked).toEqual({ pcie: true, processUtil: true });
    expect(first.rx).toBeNull(); // a rate needs two reads
    expect(first.sm).toEqual({ 7: 40 });

    const second = tick(q, t0 + 1000, { 7: null });
    expect(second.asked).toEqual({ pcie: true, processUtil: true });
    expect(second.rx).toBe(1_000_000);
    expect(second.tx).toBe(10_000);
    expect(second.sm).toEqual({ 7: null }); // NVML had no sample of it since the first read

    // between reads: the rate of the last two reads, the shares as last read; pid 8 was not
    // listed then: unknown, not 0
    for (let t = t0 + 2000; t < t0 + 1000 + PROCESS_UTIL_EVERY_MS; t += 1000) {
      const between = tick(q, t, { 7: 90, 8: 5 });
      expect(between.asked).toEqual({ pcie: false, processUtil: false });
      expect(between.rx).toBe(1_000_000);
      expect(between.sm).toEqual({ 7: null, 8: null });
    }
    const util = tick(q, t0 + 1000 + PROCESS_UTIL_EVERY_MS, { 7: 90, 8: 5 });
    expect(util.asked).toEqual({ pcie: false, processUtil: true });
    expect(util.sm).toEqual({ 7: 90, 8: 5 });

    const pcie = tick(q, t0 + 1000 + PCIE_EVERY_MS, { 7: 90, 8: 5 });
    expect(pcie.asked.pcie).toBe(true);
    expect(pcie.rx).toBe(1_000_000); // over the PCIE_EVERY_MS since the read before
  });

  test("a device without the counters has no rate and is asked no more often than one with them", () => {
    const q = new DearQueries();
    const asks: boolean[] = [];
    for (let t = 0; t <= 2 * PCIE_EVERY_MS; t += 1000) {
      const r = tick(q, 5000 + t, { 7: 10 }, { counters: false });
      expect(r.rx).toBeNull();
      asks.push(r.asked.pcie);
    }
    expect(asks.filter(Boolean).length).toBe(3); // the first, then every PCIE_EVERY_MS
  });

  test("a clock that goes back asks again rather than waiting for its old time", () => {
    const q = new DearQueries();
    tick(q, 100_000, { 7: 10 });
    tick(q, 101_000, { 7: 10 });
    expect(q.ask(0, 50_000)).toEqual({ pcie: true, processUtil: true });
  });

  test("a device gone from the count is forgotten: come back, it starts again", () => {
    const q = new DearQueries();
    tick(q, 0, { 7: 10 });
    tick(q, 1000, { 7: 10 });
    q.keepOnly(0);
    expect(q.ask(0, 2000)).toEqual({ pcie: true, processUtil: true });
  });
});
