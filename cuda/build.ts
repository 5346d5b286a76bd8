#!/usr/bin/env bun
// Builds libgpumem.so (NVML sampling + ring reader) with the system C compiler.
// Plain C, no CUDA toolkit and no nvml.h: NVML is loaded at run time with dlopen.
//   bun cuda/build.ts            build if missing or out of date; fail loudly
//   bun cuda/build.ts --install  the package's postinstall: warn, never fail the install
import { buildNative } from "../src/ffi/build";

const install = process.argv.includes("--install");
const result = buildNative({ force: process.argv.includes("--force") });
if (result.ok) {
  if (result.built) console.error(`gpumem-tui: built ${result.path}`);
} else {
  console.error(`gpumem-tui: ${result.error}`);
  if (!install) process.exit(1);
}
