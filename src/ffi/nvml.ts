// NVML through libgpumem (cuda/nvml.c): one FFI call fills one device's sample.
// Everything leaving this file is plain, validated values; "not available" is null, never 0.
import { dlopen, FFIType, ptr } from "bun:ffi";
import { libraryPath } from "./lib";
import { SAMPLE_NO_PCIE, SAMPLE_NO_PROCESS_UTIL } from "./warm-up";

const TEXT = 96;
const ERROR_LEN = 160;
const OFF_UUID = TEXT;
const OFF_PCI = 2 * TEXT;
const OFF_ERROR = 3 * TEXT;
const OFF_FIELDS = 3 * TEXT + ERROR_LEN;
const PROCESS_SIZE = 24;

export type ProcessKind = "compute" | "graphics" | "compute+graphics";

export interface NvmlProcess {
  pid: number;
  kind: ProcessKind;
  used_bytes: number | null;
  /** Its share of the GPU's SM time over the last sample period; null where NVML has none. */
  sm_percent: number | null;
}

/** One device's NVML numbers. Field names are libgpumem's (cuda/nvml.h), null = not available. */
export interface NvmlDeviceSample {
  index: number;
  name: string;
  uuid: string;
  pci_bus_id: string;
  fields: Record<string, number | null>;
  processes: NvmlProcess[];
  process_api: number | null;
  /** The first unexpected NVML error of this sample, in NVML's words. */
  error: string | null;
}

export interface NvmlSystem {
  driver_version: string | null;
  nvml_version: string | null;
  cuda_driver_version: number | null;
  device_count: number;
}

export class NvmlError extends Error {
  override name = "NvmlError";
  constructor(
    message: string,
    /** "no_driver" when libnvidia-ml.so.1 is missing: not a failure on a machine with no GPU. */
    readonly kind: "no_driver" | "init" | "query",
  ) {
    super(message);
  }
}

const symbols = {
  gpumem_nvml_init: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  gpumem_nvml_shutdown: { args: [], returns: FFIType.void },
  gpumem_nvml_device_count: { args: [], returns: FFIType.i32 },
  gpumem_nvml_driver_version: { args: [], returns: FFIType.cstring },
  gpumem_nvml_version: { args: [], returns: FFIType.cstring },
  gpumem_nvml_cuda_driver_version: { args: [], returns: FFIType.i32 },
  gpumem_nvml_sample_device: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
  gpumem_nvml_sample_quick: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  gpumem_nvml_field_names: { args: [], returns: FFIType.cstring },
  gpumem_nvml_sample_size: { args: [], returns: FFIType.u32 },
  gpumem_nvml_last_error: { args: [], returns: FFIType.cstring },
  gpumem_nvml_take_kept: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  gpumem_nvml_kept_time_ms: { args: [], returns: FFIType.f64 },
  gpumem_nvml_early_count: { args: [], returns: FFIType.i32 },
  gpumem_nvml_take_early: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
} as const;

type Lib = ReturnType<typeof dlopen<typeof symbols>>["symbols"];

let loaded: Lib | null = null;
function native(): Lib {
  return (loaded ??= dlopen(libraryPath(), symbols).symbols);
}

const KINDS: Record<number, ProcessKind> = { 1: "compute", 2: "graphics", 3: "compute+graphics" };

function text(bytes: Uint8Array, offset: number, length: number): string {
  const slice = bytes.subarray(offset, offset + length);
  const end = slice.indexOf(0);
  return new TextDecoder().decode(end < 0 ? slice : slice.subarray(0, end));
}

/** An initialized NVML session. Sampling reuses one buffer: no allocation per sample but the result. */
export class Nvml {
  private readonly buffer: Uint8Array;
  private readonly view: DataView;
  private readonly fieldNames: string[];
  private readonly processesOffset: number;
  private closed = false;

  private constructor(private readonly lib: Lib) {
    this.fieldNames = String(lib.gpumem_nvml_field_names()).split(",").filter(Boolean);
    const size = lib.gpumem_nvml_sample_size();
    this.processesOffset = OFF_FIELDS + 8 * this.fieldNames.length + 8;
    if (size < this.processesOffset) throw new NvmlError(`libgpumem.so sample layout mismatch (${size} bytes)`, "init");
    this.buffer = new Uint8Array(size);
    this.view = new DataView(this.buffer.buffer);
  }

  /** Load NVML. Throws NvmlError (kind "no_driver" where no driver is installed). */
  static open(): Nvml {
    const lib = native();
    const err = new Uint8Array(256);
    const rc = lib.gpumem_nvml_init(ptr(err), err.length);
    if (rc !== 0) throw new NvmlError(text(err, 0, err.length), rc === -1 ? "no_driver" : "init");
    return new Nvml(lib);
  }

  /**
   * The first part of the warm-up's kept sample (warmUp({ oneShot: true })), as soon as its thread
   * has it: identity, memory and the process lists of every device (every other field null), the
   * system NVML reports, and the time the sample began. The slow part still runs: takeKept (after
   * open()) gives the whole sample. Waits for that first part; null where none comes (no one-shot
   * warm-up, no driver, NVML failed). Never throws: open() says what is wrong.
   */
  static early(): { system: NvmlSystem; samples: NvmlDeviceSample[]; time_unix_ms: number } | null {
    try {
      const lib = native();
      const n = lib.gpumem_nvml_early_count();
      if (n <= 0) return null;
      const reader = new Nvml(lib); // a decoder only: NVML is the warm-up's until open()
      const samples: NvmlDeviceSample[] = [];
      for (let i = 0; i < n; i++) {
        if (lib.gpumem_nvml_take_early(i, ptr(reader.buffer)) !== 0) return null;
        samples.push(reader.decode(i, 0));
      }
      return { system: reader.versions(n), samples, time_unix_ms: lib.gpumem_nvml_kept_time_ms() };
    } catch {
      return null;
    }
  }

  get fields(): readonly string[] {
    return this.fieldNames;
  }

  system(): NvmlSystem {
    const count = this.lib.gpumem_nvml_device_count();
    if (count < 0) throw new NvmlError(String(this.lib.gpumem_nvml_last_error()), "query");
    return this.versions(count);
  }

  /** The driver's, NVML's and CUDA's versions (read once, at nvmlInit), with `count` devices. */
  private versions(count: number): NvmlSystem {
    const cuda = this.lib.gpumem_nvml_cuda_driver_version();
    return {
      driver_version: String(this.lib.gpumem_nvml_driver_version()) || null,
      nvml_version: String(this.lib.gpumem_nvml_version()) || null,
      cuda_driver_version: cuda >= 0 ? cuda : null,
      device_count: count,
    };
  }

  /**
   * Sample device `index`. A device NVML cannot reach comes back with `error` set and null fields.
   * `pcie: false` skips the PCIe byte counters (0.36-0.64 ms on an H200; one-shot samples, and the
   * screens between their reads), `processUtil: false` each process's SM share (1.4-2.7 ms; every
   * `sm_percent` is then null): bench/results/gpu-2026-11-29f/nvml-steady.
   */
  sample(index: number, opts: { pcie?: boolean; processUtil?: boolean } = {}): NvmlDeviceSample {
    if (this.closed) throw new NvmlError("NVML session is closed", "query");
    const flags = (opts.pcie === false ? SAMPLE_NO_PCIE : 0) | (opts.processUtil === false ? SAMPLE_NO_PROCESS_UTIL : 0);
    return this.decode(index, this.lib.gpumem_nvml_sample_device(index, ptr(this.buffer), flags));
  }

  /** Device `index`'s quick part alone: identity, memory and its process lists (every other field
   *  null). Between two samples, for a process's used bytes now; the next sample's rates and
   *  utilization are not touched. */
  processes(index: number): NvmlDeviceSample {
    if (this.closed) throw new NvmlError("NVML session is closed", "query");
    return this.decode(index, this.lib.gpumem_nvml_sample_quick(index, ptr(this.buffer)));
  }

  /**
   * The warm-up's own sample of device `index` (warmUp({ oneShot: true })), once, and the time
   * its sampling began: a one-shot prints it rather than asking NVML again. null where none is
   * kept (no one-shot warm-up, or taken already).
   */
  takeKept(index: number): { sample: NvmlDeviceSample; time_unix_ms: number } | null {
    if (this.closed || this.lib.gpumem_nvml_take_kept(index, ptr(this.buffer)) !== 0) return null;
    return { sample: this.decode(index, 0), time_unix_ms: this.lib.gpumem_nvml_kept_time_ms() };
  }

  /** The buffer as gpumem_nvml_sample_device left it (`rc` its answer). */
  private decode(index: number, rc: number): NvmlDeviceSample {
    const b = this.buffer;
    const fields: Record<string, number | null> = {};
    for (let i = 0; i < this.fieldNames.length; i++) {
      const v = Number(this.view.getBigInt64(OFF_FIELDS + 8 * i, true));
      fields[this.fieldNames[i]!] = v < 0 ? null : v;
    }
    const n = Math.min(this.view.getUint32(this.processesOffset - 8, true), 64);
    const api = this.view.getUint32(this.processesOffset - 4, true);
    const processes: NvmlProcess[] = [];
    for (let i = 0; i < n; i++) {
      const o = this.processesOffset + i * PROCESS_SIZE;
      const used = Number(this.view.getBigInt64(o + 8, true));
      const sm = this.view.getInt32(o + 16, true);
      processes.push({
        pid: this.view.getUint32(o, true),
        kind: KINDS[this.view.getUint32(o + 4, true)] ?? "compute",
        used_bytes: used < 0 ? null : used,
        sm_percent: sm < 0 ? null : sm,
      });
    }
    const error = text(b, OFF_ERROR, ERROR_LEN);
    return {
      index,
      name: rc === 0 ? text(b, 0, TEXT) : "",
      uuid: rc === 0 ? text(b, OFF_UUID, TEXT) : "",
      pci_bus_id: rc === 0 ? text(b, OFF_PCI, TEXT) : "",
      fields,
      processes,
      process_api: api || null,
      error: error || null,
    };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.lib.gpumem_nvml_shutdown();
  }
}

