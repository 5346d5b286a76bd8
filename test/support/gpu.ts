// GPU-only tests run with `bun run test:gpu` on a GPU machine; elsewhere they skip with this reason.
import { test } from "bun:test";

export const onGpu = process.env.GPUMEM_GPU_TESTS === "1";
export const GPU_SKIP = "(needs an NVIDIA GPU: run `bun run test:gpu` on one)";

/** A test that runs only under `bun run test:gpu`; its name carries the reason when skipped. */
export function gpuTest(name: string, fn: () => void | Promise<unknown>, timeout?: number) {
  if (onGpu) test(name, fn, timeout);
  else test.skip(`${name} ${GPU_SKIP}`, fn);
}
