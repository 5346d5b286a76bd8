// A ring header for the model's unit tests (built with test/profiler/trace.ts's batches): one
// device per entry of `totals`, every figure the test does not name zero, the header open and
// empty unless `fields` says otherwise. Recorded rings carry real headers (fixtures.test.ts).
import type { DeviceTotals, RingHeader } from "../../src/ffi/events";

const ZERO: Omit<DeviceTotals, "device"> = {
  allocated: 0,
  reserved: 0,
  active: 0,
  peak_allocated: 0,
  peak_reserved: 0,
  peak_active: 0,
  n_alloc: 0,
  n_free: 0,
  n_segment_alloc: 0,
  n_segment_free: 0,
  n_oom: 0,
  n_retries: 0,
  requested: 0,
};

export function ringHeader(totals: Partial<DeviceTotals>[], fields: Partial<Omit<RingHeader, "totals">> = {}): RingHeader {
  return {
    abi_version: 1,
    capacity: 1024,
    pid: 1,
    mode: "hook",
    n_devices: totals.length,
    attach_unix_us: 0,
    updated_unix_us: 0,
    current_step: 0,
    current_range: 0,
    current_line: 0,
    current_phase: 0,
    closed: false,
    write_index: 0,
    ...fields,
    totals: totals.map((t, device) => ({ device, ...ZERO, ...t })),
  };
}
