// `run --json`: NDJSON documents into a file while the program runs; a last one after it exits.
import { closeSync, openSync, writeSync } from "node:fs";
import type { Child } from "../collect/child";
import type { Session } from "../collect/session";
import { serialize } from "./stream";

/** The output file is opened before the program starts: a path that cannot be written costs no run. */
export async function runJson(session: Session, start: () => Child, opts: { output: string; intervalMs: number }): Promise<number> {
  let fd: number;
  try {
    fd = openSync(opts.output, "w", 0o644);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === "ENOENT" ? "its directory does not exist" : err.code === "EACCES" ? "permission denied" : err.code === "EISDIR" ? "it is a directory" : err.message;
    throw new Error(`cannot write the samples to ${opts.output}: ${why}; the program was not started`);
  }
  const child = start();
  let done = false;
  const code = child.exited.then((c) => ((done = true), c));
  try {
    while (!done) {
      writeSync(fd, `${serialize(session.tick())}\n`);
      await Promise.race([code, Bun.sleep(opts.intervalMs)]);
    }
    // The last line: the program's whole run as the models hold it (its processes exited, their
    // steps, peak step and findings in their profiles), with its exit status.
    const last = session.tick();
    last.program = { pid: child.pid, exit_status: await code };
    writeSync(fd, `${serialize(last)}\n`);
  } finally {
    closeSync(fd);
  }
  return code;
}
