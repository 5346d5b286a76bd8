// GPU-only tests run with `bun run test:gpu` on a GPU machine; elsewhere they skip with this reason.
import { test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const onGpu = process.env.GPUMEM_GPU_TESTS === "1";
export const GPU_SKIP = "(needs an NVIDIA GPU: run `bun run test:gpu` on one)";

/** A test that runs only under `bun run test:gpu`; its name carries the reason when skipped. */
export function gpuTest(name: string, fn: () => void | Promise<unknown>, timeout?: number) {
  if (onGpu) test(name, fn, timeout);
  else test.skip(`${name} ${GPU_SKIP}`, fn);
}

/** Where a GPU test's end-to-end driver writes its report: under GPUMEM_GPU_REPORTS where set (a GPU
 *  session keeps them, bench/gpu-session.sh), else in a folder that `done` removes. */
export function reportDir(name: string): { dir: string; done: () => void } {
  const kept = process.env.GPUMEM_GPU_REPORTS;
  if (kept) return (mkdirSync(kept, { recursive: true }), { dir: join(kept, name), done: () => {} });
  const base = mkdtempSync(join(tmpdir(), "gpumem-gpu-report-"));
  return { dir: join(base, name), done: () => rmSync(base, { recursive: true, force: true }) };
}

/** A whole end-to-end run (minutes): a GPU test, left out where GPUMEM_GPU_E2E=0 (a GPU session that
 *  runs them as a part of their own, bench/gpu-session.sh e2e). */
export function gpuE2eTest(name: string, fn: () => void | Promise<unknown>, timeout?: number) {
  if (process.env.GPUMEM_GPU_E2E === "0") test.skip(`${name} (GPUMEM_GPU_E2E=0)`, fn);
  else gpuTest(name, fn, timeout);
}

/** Whether this machine has an NVIDIA driver NVML opens (whatever GPUMEM_GPU_TESTS says). */
export const hasDriver = (() => {
  try {
    // Loaded here only: a test file that never asks pays nothing for the native library.
    const { Nvml } = require("../../src/ffi/nvml") as typeof import("../../src/ffi/nvml");
    Nvml.open().close();
    return true;
  } catch {
    return false;
  }
})();

/** A test whose expected output was captured on a machine without a driver (the machine's own GPUs
 *  would join the recording's process and devices): skipped, with that reason, where one is. */
export function noDriverTest(name: string, fn: () => void | Promise<unknown>, timeout?: number) {
  if (!hasDriver) test(name, fn, timeout);
  else test.skip(`${name} (compared with captures made without an NVIDIA driver; this machine has one)`, fn);
}
