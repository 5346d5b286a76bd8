#!/usr/bin/env bun
// Builds libgpumem.so (NVML sampling + ring reader) with the system C compiler.
// Plain C, no CUDA toolkit and no nvml.h: NVML is loaded at run time with dlopen.
//   bun cuda/build.ts             build cuda/build/libgpumem.so if missing or out of date; fail loudly
//   bun cuda/build.ts --install   the package's postinstall: same, but warn instead of failing
//   bun cuda/build.ts --prebuilt  the package's prepack: prebuilt/<platform>-<arch>/ for the tarball
import { buildNative, buildPrebuilt } from "../src/ffi/build";
import { buildInject } from "../src/attach/helper";

const install = process.argv.includes("--install");
const result = process.argv.includes("--prebuilt") ? buildPrebuilt() : buildNative({ force: process.argv.includes("--force") });
if (result.ok) {
  if (result.built) console.error(`gpumem-tui: built ${result.path}`);
} else {
  console.error(`gpumem-tui: ${result.error}`);
  if (!install) process.exit(1);
}
// The attach helper (cuda/inject.c): an executable of its own, x86-64 Linux only; elsewhere attach says so.
if (process.arch === "x64" && !process.argv.includes("--prebuilt")) {
  const inject = buildInject({ force: process.argv.includes("--force") });
  if (inject.ok && inject.built) console.error(`gpumem-tui: built ${inject.path}`);
  if (!inject.ok) {
    console.error(`gpumem-tui: ${inject.error}`);
    if (!install) process.exit(1);
  }
}
