// `run --json`: NDJSON documents into a file while the program runs; a last one after it exits.
import { closeSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { Child } from "../collect/child";
import type { Session } from "../collect/session";
import type { Document } from "../system/schema";
import { nameRefusal, openOutput, PrivateFileError, removeOpened, why, writeAll } from "../system/private-file";
import { serialize } from "./stream";

/**
 * The output file is opened before the program starts: a path that cannot be written costs no run,
 * and one that is not ours to write (a link, another user's file) is refused (system/private-file).
 * Once the program runs, its exit status is what we return, whatever happens to the output.
 */
export async function runJson(session: Session, start: () => Child, opts: { output: string; intervalMs: number; lines?: string }): Promise<number> {
  let out: { fd: number; created: boolean };
  try {
    out = openOutput(opts.output);
  } catch (e) {
    throw new Error(`cannot write the samples to ${opts.output}: ${e instanceof PrivateFileError ? e.reason : why(e)}; the program was not started`);
  }
  // The output named first is said first; the line profile beside it after, leaving nothing behind.
  const refused = opts.lines === undefined ? null : linesRefusal(opts.lines);
  if (refused) {
    if (out.created) removeOpened(opts.output, out.fd);
    closeSync(out.fd);
    throw new Error(`cannot write the line profile (GPUMEM_PROFILE_JSON) to ${opts.lines}: ${refused}; the program was not started`);
  }
  let child: Child;
  try {
    child = start();
  } catch (e) {
    if (out.created) removeOpened(opts.output, out.fd);
    closeSync(out.fd);
    throw e;
  }
  let done = false;
  const code = child.exited.then((c) => ((done = true), c));
  // An error on the output (a full disk) is said once and ends the samples, not the run: the file,
  // cut mid-line, is removed (it would not parse, and a full disk is the program's too).
  let fd: number | null = out.fd;
  const write = (doc: Document) => {
    if (fd === null) return;
    try {
      writeAll(fd, `${serialize(doc)}\n`);
    } catch (e) {
      removeOpened(opts.output, fd);
      closeSync(fd);
      fd = null;
      // write(2), not process.stderr: that stream makes a pipe non-blocking, and with `2>&1 | tee`
      // the pipe is the program's stdout too (a full pipe would then fail the program's writes).
      writeSync(2, `gpumem-tui: cannot write the samples to ${opts.output}: ${why(e)}; removed it; pid ${child.pid} runs on, and its exit status is run's\n`);
    }
  };
  try {
    while (!done) {
      write(session.tick());
      await Promise.race([code, Bun.sleep(opts.intervalMs)]);
    }
    // The last line: the program's whole run as the models hold it (its processes exited, their
    // steps, peak step and findings in their profiles), with its exit status.
    const last = session.tick();
    last.program = { pid: child.pid, exit_status: await code };
    write(last);
  } finally {
    if (fd !== null) closeSync(fd);
  }
  return code;
}

/**
 * Why the agent would refuse to write its line profile at `path` (GPUMEM_PROFILE_JSON), or null:
 * the rules of agent/gpumem_agent/paths.py check_replaceable, which renames its file onto the name
 * only over nothing or a regular file of the user's own. Checked here before the program starts,
 * as --output is, so a link or FIFO planted there costs no run; the agent checks again at exit.
 */
export function linesRefusal(path: string): string | null {
  try {
    if (!statSync(dirname(path)).isDirectory()) return why({ code: "ENOENT" });
    return nameRefusal(path, { owner: true });
  } catch (e) {
    return why(e);
  }
}
