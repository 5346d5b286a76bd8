// The package's own folder. Every path into the package (the native sources and library, the
// agent, the demo recording) starts here, so that the sources (src/*.ts) and the bundle the
// package runs (dist/*.js, `bun run build:bundle`) find the same files: both sit one level down.
// Plain string work: node:path costs about 1 ms of start-up, before NVML's warm-up has started
// (src/ffi/warm-up.ts finds the library through this file).
const here = import.meta.dir;

export const ROOT = here.slice(0, here.lastIndexOf("/")) || "/";
