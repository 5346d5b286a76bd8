// The package's own folder. Every path into the package (the native sources and library, the
// agent, the demo recording) starts here, so that the sources (src/*.ts) and the bundle the
// package runs (dist/*.js, `bun run build:bundle`) find the same files: both sit one level down.
import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "..");
