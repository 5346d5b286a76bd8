// `run --json`: NDJSON documents into a file while the program runs; a last one after it exits.
import { closeSync, openSync, writeSync } from "node:fs";
import type { Child } from "../collect/child";
import type { SystemCollector } from "../collect/system";
import { serialize } from "./stream";

export async function runJson(collector: SystemCollector, child: Child, opts: { output: string; intervalMs: number }): Promise<number> {
  const fd = openSync(opts.output, "w", 0o644);
  let done = false;
  const code = child.exited.then((c) => ((done = true), c));
  try {
    while (!done) {
      writeSync(fd, `${serialize(collector.sample())}\n`);
      await Promise.race([code, Bun.sleep(opts.intervalMs)]);
    }
    writeSync(fd, `${serialize(collector.sample())}\n`);
  } finally {
    closeSync(fd);
  }
  return code;
}
