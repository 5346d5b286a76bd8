// A file the user names (a snapshot, a recording, a manifest beside it), opened so that it cannot
// block or mislead a reader: opened non-blocking (a FIFO or a terminal returns at once) and refused
// unless it is a regular file. Readers then take its bytes from this descriptor, never by the path
// again, so what was checked is what is read.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

export class InputFileError extends Error {
  override name = "InputFileError";
}

const KINDS: [(s: import("node:fs").Stats) => boolean, string][] = [
  [(s) => s.isDirectory(), "a directory"],
  [(s) => s.isFIFO(), "a FIFO (named pipe)"],
  [(s) => s.isSocket(), "a socket"],
  [(s) => s.isCharacterDevice() || s.isBlockDevice(), "a device"],
];

/** An open regular file: its descriptor and size. `what` names it in errors ("snapshot"…). */
export function openRegular(path: string, what: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new InputFileError(`${path}: ${code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : (e as Error).message}`);
  }
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    const kind = KINDS.find(([is]) => is(st))?.[1] ?? "not a regular file";
    throw new InputFileError(`${path} is ${kind}, not a ${what} file`);
  }
  return { fd, size: st.size };
}

/** The first `n` bytes of an open file (fewer where it is shorter). */
export function readHead(fd: number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  let got = 0;
  while (got < n) {
    const k = readSync(fd, b, got, n - got, got);
    if (k === 0) break;
    got += k;
  }
  return b.subarray(0, got);
}

/** A whole regular file of at most `max` bytes, as text (JSON beside a recording, an agent's
 *  manifest): one that is larger is refused in words before any of it is read. */
export function readSmallText(path: string, what: string, max: number): string {
  const { fd, size } = openRegular(path, what);
  try {
    if (size > max) throw new InputFileError(`${path} is ${size} bytes: larger than any ${what} (${max} bytes at most); refusing`);
    const b = readHead(fd, size + 1);
    if (b.length > max) throw new InputFileError(`${path} grew past ${max} bytes while being read; refusing`);
    return new TextDecoder().decode(b);
  } finally {
    closeSync(fd);
  }
}
