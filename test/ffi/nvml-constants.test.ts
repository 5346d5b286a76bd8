// A device's constants (maximum clocks, the calls it refuses) kept from one run to the next, for
// one driver and one boot only (cuda/nvml_constants.c): what makes a second `--json --once` skip
// NVML's slowest calls. Exercised here through the library's own functions, with no GPU.
import { describe, expect, test } from "bun:test";
import { dlopen, FFIType, ptr } from "bun:ffi";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { libraryPath } from "../../src/ffi/lib";

const { symbols: lib } = dlopen(libraryPath(), {
  gpumem_nvml_constants_dir: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.void },
  gpumem_nvml_constants_load: { args: [FFIType.cstring, FFIType.cstring, FFIType.cstring, FFIType.ptr], returns: FFIType.i32 },
  gpumem_nvml_constants_store: { args: [FFIType.cstring, FFIType.cstring, FFIType.cstring, FFIType.ptr], returns: FFIType.i32 },
});

const UUID = "GPU-6a1f0c2e-93b4-4d7e-8c51-0f2d9b7e4a13";
const DRIVER = "580.159.04";
const cstr = (s: string) => ptr(Buffer.from(`${s}\0`));

/** The struct: sm_clock_max_mhz, memory_clock_max_mhz (int64), unsupported (uint32). */
function constants(sm: number, mem: number, unsupported: number): Uint8Array {
  const b = new Uint8Array(24);
  const v = new DataView(b.buffer);
  v.setBigInt64(0, BigInt(sm), true);
  v.setBigInt64(8, BigInt(mem), true);
  v.setUint32(16, unsupported, true);
  return b;
}

function load(dir: string, uuid = UUID, driver = DRIVER) {
  const b = new Uint8Array(24);
  const hit = lib.gpumem_nvml_constants_load(cstr(dir), cstr(uuid), cstr(driver), ptr(b));
  const v = new DataView(b.buffer);
  return hit ? { sm: Number(v.getBigInt64(0, true)), mem: Number(v.getBigInt64(8, true)), unsupported: v.getUint32(16, true) } : null;
}

const store = (dir: string, c: Uint8Array, uuid = UUID, driver = DRIVER) => lib.gpumem_nvml_constants_store(cstr(dir), cstr(uuid), cstr(driver), ptr(c));
const fresh = () => join(mkdtempSync(join(tmpdir(), "gpumem-constants-")), "gpumem-tui", "nvml");

describe("a device's constants across runs", () => {
  test("kept, then read back as they were: an H100's max clocks and its refused fan call", () => {
    const dir = fresh();
    expect(load(dir)).toBeNull(); // nothing kept yet: the caller asks the device
    expect(store(dir, constants(1980, 2619, 1))).toBe(0);
    expect(load(dir)).toEqual({ sm: 1980, mem: 2619, unsupported: 1 });
    expect(readdirSync(dir)).toEqual([UUID]); // one file per device, no temporary left behind
    const text = readFileSync(join(dir, UUID), "utf8");
    expect(text).toMatch(/^gpumem-nvml-constants 1\nboot [0-9a-f-]{36} driver 580\.159\.04\nsm_clock_max_mhz 1980 memory_clock_max_mhz 2619 unsupported 1\n$/);
  });

  test("'not available' (-1) survives the round trip", () => {
    const dir = fresh();
    store(dir, constants(-1, -1, 0));
    expect(load(dir)).toEqual({ sm: -1, mem: -1, unsupported: 0 });
  });

  test("another driver, another boot or a damaged file: not used (the device is asked again)", () => {
    const dir = fresh();
    store(dir, constants(1980, 2619, 0));
    expect(load(dir, UUID, "580.160.01")).toBeNull();
    const file = join(dir, UUID);
    const text = readFileSync(file, "utf8");
    writeFileSync(file, text.replace(/boot \S+/, "boot 00000000-0000-0000-0000-000000000000"));
    expect(load(dir)).toBeNull();
    writeFileSync(file, "gpumem-nvml-constants 1\nboot");
    expect(load(dir)).toBeNull();
    expect(store(dir, constants(1980, 2619, 0))).toBe(0); // rewritten whole
    expect(load(dir)?.sm).toBe(1980);
  });

  test("a UUID that is not a plain name is never made into a path", () => {
    const dir = fresh();
    expect(store(dir, constants(1, 2, 0), "../../escape")).toBe(-1);
    expect(existsSync(join(dir, "..", "..", "escape"))).toBe(false);
    expect(load(dir, "../../escape")).toBeNull();
    expect(store("", constants(1, 2, 0))).toBe(-1); // no directory (no HOME): nothing is kept
  });

  test("the directory is the user's cache: $XDG_CACHE_HOME, else ~/.cache", () => {
    const out = new Uint8Array(512);
    lib.gpumem_nvml_constants_dir(ptr(out), out.length);
    const dir = new TextDecoder().decode(out.subarray(0, out.indexOf(0)));
    const xdg = process.env.XDG_CACHE_HOME;
    expect(dir).toBe(xdg?.startsWith("/") ? `${xdg}/gpumem-tui/nvml` : `${process.env.HOME}/.cache/gpumem-tui/nvml`);
  });
});
