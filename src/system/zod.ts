// zod, for the schemas built at their first use (manifest.ts): required there, so that a start that
// reads no manifest (`gpumem-tui --json --once` where no agent runs) does not load it. Required as
// this module, not as "zod": Bun's bundler resolves a require of the package to its CommonJS build,
// a second copy of zod inlined into the requiring file's chunk, where this file is a chunk of its
// own that imports the bundle's one ES-module copy.
export { z } from "zod";
